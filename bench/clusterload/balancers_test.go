package clusterload

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/pki"
)

// Each connection gets a balancer of its own on [::1] that knows every
// server; the readiness checks get the admin's credentials in files.
func TestBalancersPutEachConnectionBehindItsOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{Name: "admin", CommonName: "admin", Organization: []string{"system:masters"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	admin := rest.TLSClientConfig{CAData: ca.CertPEM, CertData: certPEM, KeyData: keyPEM}
	servers := []Server{
		{Config: &rest.Config{Host: "https://[fd00::2]:6443", TLSClientConfig: admin}},
		{Config: &rest.Config{Host: "https://[fd00::3]:6443", TLSClientConfig: admin}},
	}
	b, err := balancersIn(ctx, servers, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"[fd00::2]:6443", "[fd00::3]:6443"}; !reflect.DeepEqual(b.servers, want) {
		t.Errorf("servers %q, want %q", b.servers, want)
	}
	for file, want := range map[string]string{b.ready.CAFile: string(ca.CertPEM), b.ready.CertFile: string(certPEM) + string(keyPEM)} {
		if got, err := os.ReadFile(file); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", file, got, err, want)
		}
	}
	first, err := b.config("node-0")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.config("node-50")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Host, "https://[::1]:") || first.Host == second.Host {
		t.Errorf("hosts %s and %s: want a balancer each on [::1]", first.Host, second.Host)
	}
	if tr, ok := first.Transport.(*http2.Transport); !ok || tr.TLSClientConfig == nil || !reflect.DeepEqual(first.TLSClientConfig, rest.TLSClientConfig{}) {
		t.Errorf("transport %T, TLS config %+v: want HTTP/2 alone, the admin's credentials in its TLS config", first.Transport, first.TLSClientConfig)
	}
	if n := b.awayFromPreferred(); n != 0 {
		t.Errorf("awayFromPreferred with no connection: %d", n)
	}
}
