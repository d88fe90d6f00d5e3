package readiness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/pki"
)

// testPKI is a cluster CA with a serving certificate for [::1] and a
// node's client certificate, and another CA's client certificate.
type testPKI struct {
	ca                     *pki.Authority
	server, node, stranger tls.Certificate
	files                  TLSFiles
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.LoadOrCreateCA(dir, "other-ca", "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *pki.Authority, leaf pki.Leaf) (tls.Certificate, string, string) {
		cert, key, err := ca.LoadOrIssue(dir, leaf)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return pair, cert, key
	}
	p := testPKI{ca: ca}
	var cert, key string
	p.server, cert, key = issue(ca, pki.Leaf{Name: "apiserver", CommonName: "kube-apiserver", Server: true, IPs: []net.IP{net.IPv6loopback}})
	p.node, _, _ = issue(ca, pki.Leaf{Name: "node", CommonName: "system:node:n1", Organization: []string{"system:nodes"}, Client: true})
	p.stranger, _, _ = issue(other, pki.Leaf{Name: "stranger", CommonName: "system:node:n1", Organization: []string{"system:nodes"}, Client: true})
	p.files = TLSFiles{CertFile: cert, KeyFile: key, ClientCAFile: filepath.Join(dir, "ca.crt")}
	return p
}

// client trusts the cluster CA and presents certs.
func (p testPKI) client(certs ...tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
}

func TestServeRequiresAClusterClientCertificate(t *testing.T) {
	p := newTestPKI(t)
	tlsCfg, err := ServerTLS(p.files)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Probes: []Probe{{"p", fixed(nil)}}})
	c.CheckOnce(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, l, tlsCfg, c.Handler()) }()
	url := "https://" + l.Addr().String() + Path

	resp, err := p.client(p.node).Get(url)
	if err != nil {
		t.Fatalf("with a node certificate: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("with a node certificate: %d %q, want 200 \"ok\"", resp.StatusCode, body)
	}
	// Negative: no certificate, or one of another CA, is refused in the
	// handshake: no answer at all, ready or not.
	for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's certificate": {p.stranger}} {
		resp, err := p.client(certs...).Get(url)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d, want the handshake refused", name, resp.StatusCode)
		}
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestServerTLSBadFiles(t *testing.T) {
	p := newTestPKI(t)
	missing := p.files
	missing.ClientCAFile = filepath.Join(t.TempDir(), "none.crt")
	if _, err := ServerTLS(missing); err == nil {
		t.Error("a missing client CA: no error")
	}
	noCert := p.files
	noCert.CertFile = filepath.Join(t.TempDir(), "none.crt")
	if _, err := ServerTLS(noCert); err == nil {
		t.Error("a missing serving certificate: no error")
	}
}
