package agent

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/pki"
)

// joinedNode lays out a joined node: the CA kept at the join, the kubelet's
// kubeconfig and its client certificate (cert and key in one file, as
// the kubelet keeps kubelet-client-current.pem).
func joinedNode(t *testing.T, signer *pki.Authority, ca *pki.Authority) config.AgentPaths {
	t.Helper()
	p := config.NewAgentPaths(t.TempDir(), t.TempDir())
	os.MkdirAll(p.KubeletPKI, 0o700)
	os.WriteFile(p.CAFile, ca.CertPEM, 0o644)
	os.WriteFile(p.KubeletKubeconfig, []byte("{}"), 0o600)
	dir := t.TempDir()
	cert, key, err := signer.LoadOrIssue(dir, pki.Leaf{Name: "client", CommonName: "system:node:n", Organization: []string{"system:nodes"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := os.ReadFile(cert)
	k, _ := os.ReadFile(key)
	os.WriteFile(p.KubeletClientCert, append(c, k...), 0o600)
	return p
}

func TestOwnCredentials(t *testing.T) {
	ca, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	other, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	now := time.Now()

	p := joinedNode(t, ca, ca)
	if expires, err := ownCredentials(p, now); err != nil || expires.Before(now.Add(300*24*time.Hour)) {
		t.Errorf("a fresh certificate: expires %v, %v", expires, err)
	}
	if _, err := ownCredentials(p, now.Add(400*24*time.Hour)); err == nil || !strings.Contains(err.Error(), "is not usable: x509: certificate has expired") {
		t.Errorf("an expired certificate: %v", err)
	}
	if _, err := ownCredentials(joinedNode(t, other, ca), now); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a certificate of another CA: %v", err)
	}
	os.Remove(p.KubeletKubeconfig)
	if _, err := ownCredentials(p, now); err == nil || err.Error() != "no kubeconfig of its own ("+p.KubeletKubeconfig+")" {
		t.Errorf("no kubeconfig: %v", err)
	}
	fresh := config.NewAgentPaths(t.TempDir(), t.TempDir())
	os.WriteFile(fresh.KubeletKubeconfig, []byte("{}"), 0o600)
	if _, err := ownCredentials(fresh, now); err == nil || err.Error() != "no client certificate of its own ("+fresh.KubeletClientCert+")" {
		t.Errorf("never joined: %v", err)
	}
	if err := forgetCredentials(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.KubeletClientCert)); !os.IsNotExist(err) {
		t.Error("forgetCredentials left the client certificate")
	}
}

// A serving certificate from the cluster CA (issued before kubelet serving
// certificates had a CA of their own) is removed so the kubelet asks for a
// new one; one from the kubelet serving CA stays, and so does a node with
// none.
func TestDropClusterCAServingCert(t *testing.T) {
	cluster, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	serving, _ := pki.LoadOrCreateCA(t.TempDir(), "kubelet-serving-ca", "k1m-kubelet-serving-ca")
	for _, tc := range []struct {
		name   string
		signer *pki.Authority
		want   bool
	}{{"cluster CA", cluster, true}, {"kubelet serving CA", serving, false}, {"none yet", nil, false}} {
		p := joinedNode(t, cluster, cluster)
		if tc.signer != nil {
			dir := t.TempDir()
			cert, key, err := tc.signer.LoadOrIssue(dir, pki.Leaf{Name: "serving", CommonName: "system:node:n", Organization: []string{"system:nodes"}, Server: true, IPs: []net.IP{net.ParseIP("fddf:4035:b520::11")}})
			if err != nil {
				t.Fatal(err)
			}
			c, _ := os.ReadFile(cert)
			k, _ := os.ReadFile(key)
			os.WriteFile(p.KubeletServingCert, append(c, k...), 0o600)
		}
		dropped, err := dropClusterCAServingCert(p)
		_, statErr := os.Stat(p.KubeletServingCert)
		if err != nil || dropped != tc.want || os.IsNotExist(statErr) != (tc.want || tc.signer == nil) {
			t.Errorf("serving certificate from %s: dropped %v, %v, file gone %v; want dropped %v", tc.name, dropped, err, os.IsNotExist(statErr), tc.want)
		}
	}
}
