package agent

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/pki"
)

// node lays out a joined node: the CA kept at the join, the kubelet's
// kubeconfig and its client certificate (cert and key in one file, as
// the kubelet keeps kubelet-client-current.pem).
func node(t *testing.T, signer *pki.Authority, ca *pki.Authority) paths {
	t.Helper()
	p := paths{data: t.TempDir()}
	os.MkdirAll(p.kubeletPKI(), 0o700)
	os.WriteFile(p.caFile(), ca.CertPEM, 0o644)
	os.WriteFile(p.kubeletKubeconfig(), []byte("{}"), 0o600)
	dir := t.TempDir()
	cert, key, err := signer.LoadOrIssue(dir, pki.Leaf{Name: "client", CommonName: "system:node:n", Organization: []string{"system:nodes"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := os.ReadFile(cert)
	k, _ := os.ReadFile(key)
	os.WriteFile(p.kubeletClientCert(), append(c, k...), 0o600)
	return p
}

func TestOwnCredentials(t *testing.T) {
	ca, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	other, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	now := time.Now()

	p := node(t, ca, ca)
	if expires, err := p.ownCredentials(now); err != nil || expires.Before(now.Add(300*24*time.Hour)) {
		t.Errorf("a fresh certificate: expires %v, %v", expires, err)
	}
	if _, err := p.ownCredentials(now.Add(400 * 24 * time.Hour)); err == nil || !strings.Contains(err.Error(), "is not usable: x509: certificate has expired") {
		t.Errorf("an expired certificate: %v", err)
	}
	if _, err := node(t, other, ca).ownCredentials(now); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a certificate of another CA: %v", err)
	}
	os.Remove(p.kubeletKubeconfig())
	if _, err := p.ownCredentials(now); err == nil || err.Error() != "no kubeconfig of its own ("+p.kubeletKubeconfig()+")" {
		t.Errorf("no kubeconfig: %v", err)
	}
	fresh := paths{data: t.TempDir()}
	os.WriteFile(fresh.kubeletKubeconfig(), []byte("{}"), 0o600)
	if _, err := fresh.ownCredentials(now); err == nil || err.Error() != "no client certificate of its own ("+fresh.kubeletClientCert()+")" {
		t.Errorf("never joined: %v", err)
	}
	if err := p.forgetCredentials(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.kubeletClientCert())); !os.IsNotExist(err) {
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
		p := node(t, cluster, cluster)
		if tc.signer != nil {
			dir := t.TempDir()
			cert, key, err := tc.signer.LoadOrIssue(dir, pki.Leaf{Name: "serving", CommonName: "system:node:n", Organization: []string{"system:nodes"}, Server: true, IPs: []net.IP{net.ParseIP("fddf:4035:b520::11")}})
			if err != nil {
				t.Fatal(err)
			}
			c, _ := os.ReadFile(cert)
			k, _ := os.ReadFile(key)
			os.WriteFile(p.kubeletServingCert(), append(c, k...), 0o600)
		}
		dropped, err := p.dropClusterCAServingCert()
		_, statErr := os.Stat(p.kubeletServingCert())
		if err != nil || dropped != tc.want || os.IsNotExist(statErr) != (tc.want || tc.signer == nil) {
			t.Errorf("serving certificate from %s: dropped %v, %v, file gone %v; want dropped %v", tc.name, dropped, err, os.IsNotExist(statErr), tc.want)
		}
	}
}
