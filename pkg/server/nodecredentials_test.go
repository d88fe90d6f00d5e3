package server

import (
	"context"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/agent"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/pki"
)

// credentialsSetup is a server "s1" at fddf:4035:b520::1 with a cluster CA
// and its node's paths under a fresh directory.
func credentialsSetup(t *testing.T) (*Server, *certs, *config.CompletedAgent) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir, "ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	a := &config.CompletedAgent{Paths: config.NewAgentPaths(filepath.Join(dir, "agent"), filepath.Join(dir, "run")), APIServerURL: "https://[::1]:6443"}
	return &Server{nodeName: "s1", nodeIP: "fddf:4035:b520::1", out: io.Discard}, &certs{cluster: authority{Authority: ca}}, a
}

// A server's node gets a client certificate from the server: system:node:
// NAME in system:nodes, from the cluster CA, as the kubelet keeps one (a
// dated file and the link kubelet-client-current.pem), with the CA and a
// kubeconfig naming it; the agent then starts on it. Done once: a valid
// certificate is kept.
func TestOwnNodeCredentials(t *testing.T) {
	s, c, a := credentialsSetup(t)
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	if err := s.ownNodeCredentials(ctx, client, c, a); err != nil {
		t.Fatal(err)
	}
	p := a.Paths
	if _, why := agent.OwnCredentials(p, time.Now()); why != nil {
		t.Fatalf("the agent would not start on them: %v", why)
	}
	cert, err := pki.ReadCertFile(p.KubeletClientCert)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:s1" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("certificate for %s %v usages %v, want system:node:s1 [system:nodes] client auth", cert.Subject.CommonName, cert.Subject.Organization, cert.ExtKeyUsage)
	}
	if target, err := os.Readlink(p.KubeletClientCert); err != nil || filepath.Dir(target) != "." {
		t.Errorf("%s: link to %q (%v), want a link to a dated file beside it", p.KubeletClientCert, target, err)
	}
	kc, err := clientcmd.LoadFromFile(p.KubeletKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	auth := kc.AuthInfos["default-auth"]
	if kc.Clusters["k1m"].Server != a.APIServerURL || auth == nil || auth.ClientCertificate != p.KubeletClientCert || auth.ClientKey != p.KubeletClientCert {
		t.Errorf("kubeconfig %+v, want server %s and the certificate file as certificate and key", kc, a.APIServerURL)
	}
	before, _ := os.ReadFile(p.KubeletClientCert)
	if err := s.ownNodeCredentials(ctx, client, c, a); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p.KubeletClientCert); string(after) != string(before) {
		t.Error("a valid certificate was replaced")
	}
}

// A node name that is a Node already is refused before anything is
// written (a join token may have taken it before the server joined), even
// when its status names this server's address: a node writes its own.
func TestOwnNodeCredentialsRefuseATakenName(t *testing.T) {
	node := func(ip string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "s1", CreationTimestamp: metav1.Unix(1795000000, 0)},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	}
	s, c, a := credentialsSetup(t)
	err := s.ownNodeCredentials(context.Background(), fake.NewSimpleClientset(node("fddf:4035:b520::66")), c, a)
	want := "--node-name s1: the cluster has a Node of that name already (registered 2026-11-18T11:06:40Z), and this server's node has no credentials of its own yet: it may have joined with a join token before this server did. Delete it if it is a stale node of this machine (k1m kubectl delete node s1), or start this server with another --node-name"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if _, err := os.Stat(a.Paths.KubeletKubeconfig); !os.IsNotExist(err) {
		t.Errorf("the kubeconfig was written although refused: %v", err)
	}
	if err := s.ownNodeCredentials(context.Background(), fake.NewSimpleClientset(node("fddf:4035:b520::1")), c, a); err == nil || err.Error() != want {
		t.Errorf("a Node claiming this server's address: %v\nwant %s", err, want)
	}
}
