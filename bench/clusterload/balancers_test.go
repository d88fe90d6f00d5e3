package clusterload

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// Each connection gets a balancer of its own on [::1] that knows every
// server; the readiness checks get the admin's credentials in files.
func TestBalancersPutEachConnectionBehindItsOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := rest.TLSClientConfig{CAData: []byte("CA\n"), CertData: []byte("CERT\n"), KeyData: []byte("KEY\n")}
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
	for file, want := range map[string]string{b.ready.CAFile: "CA\n", b.ready.CertFile: "CERT\nKEY\n"} {
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
	if !reflect.DeepEqual(first.TLSClientConfig, admin) {
		t.Errorf("TLS config %+v, want the admin's %+v", first.TLSClientConfig, admin)
	}
	if n := b.awayFromPreferred(); n != 0 {
		t.Errorf("awayFromPreferred with no connection: %d", n)
	}
}
