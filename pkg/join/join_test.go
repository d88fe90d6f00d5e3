package join

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/pki"

	"k8s.io/client-go/tools/clientcmd"
)

func TestSettingsRoundTrip(t *testing.T) {
	s := Settings{RenewInterval: 30 * time.Second, LeaseDurationSeconds: 120, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108",
		RestartSpread: 1500 * time.Millisecond, PodRoutes: constants.PodRoutesProvider}
	got, err := SettingsFromData(s.Data())
	if err != nil || got != s {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if got := s.Data()["podRoutes"]; got != "provider" {
		t.Errorf("podRoutes in the data: %q, want provider", got)
	}
	// An earlier release's data has no spread (none) and no podRoutes
	// (k1m routed the pod ranges).
	earlier := s.Data()
	delete(earlier, "leaseChangeRestartSpread")
	delete(earlier, "podRoutes")
	older := s
	older.RestartSpread, older.PodRoutes = 0, constants.PodRoutesK1m
	if got, err := SettingsFromData(earlier); err != nil || got != older {
		t.Fatalf("an earlier release's data: %+v, %v; want %+v", got, err, older)
	}
	for _, v := range []string{"", "Provider", "host-gw"} {
		unknown := s.Data()
		unknown["podRoutes"] = v
		want := `kube-public/k1m-cluster: podRoutes "` + v + `": want k1m or provider`
		if _, err := SettingsFromData(unknown); err == nil || err.Error() != want {
			t.Errorf("podRoutes %q: %v, want %s", v, err, want)
		}
	}
	negative := s.Data()
	negative["leaseChangeRestartSpread"] = "-1s"
	want := `kube-public/k1m-cluster: leaseChangeRestartSpread "-1s": want a duration, 0s or more`
	if _, err := SettingsFromData(negative); err == nil || err.Error() != want {
		t.Fatalf("a negative spread: %v, want %s", err, want)
	}
	bad := s.Data()
	delete(bad, "clusterDNS")
	if _, err := SettingsFromData(bad); err == nil || !strings.Contains(err.Error(), "clusterDNS") {
		t.Fatalf("want an error naming clusterDNS, got %v", err)
	}
}

// The slowest interval in flight at the last lease profile change is
// written only when there is one: without it (before any change, and in
// an earlier release's data) the key is absent and reads as 0.
func TestSettingsSlowestInFlightRoundTrip(t *testing.T) {
	base := Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108",
		RestartSpread: 30 * time.Millisecond, PodRoutes: constants.PodRoutesK1m}
	changed := base
	changed.SlowestInFlight = 40 * time.Second
	for _, c := range []struct {
		name    string
		s       Settings
		wantKey string // "" for absent
	}{
		{"without a bound", base, ""},
		{"after a change from 40s", changed, "40s"},
	} {
		data := c.s.Data()
		if got, ok := data["leaseChangeSlowestInFlight"]; got != c.wantKey || ok != (c.wantKey != "") {
			t.Errorf("%s: leaseChangeSlowestInFlight %q (present %v), want %q", c.name, got, ok, c.wantKey)
		}
		if got, err := SettingsFromData(data); err != nil || got != c.s {
			t.Errorf("%s: round trip %+v, %v; want %+v", c.name, got, err, c.s)
		}
	}
	for _, v := range []string{"0s", "-40s", "forty", ""} {
		data := changed.Data()
		data["leaseChangeSlowestInFlight"] = v
		want := `kube-public/k1m-cluster: leaseChangeSlowestInFlight "` + v + `": want a duration above 0s`
		if _, err := SettingsFromData(data); err == nil || err.Error() != want {
			t.Errorf("leaseChangeSlowestInFlight %q: %v, want %s", v, err, want)
		}
	}
}

// fakeServer serves cluster-info and k1m-cluster the way kube-apiserver
// does, accepting secret as the only bearer token for k1m-cluster.
func fakeServer(t *testing.T, secret string) (*httptest.Server, []byte) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	caPEM := certPEM(srv)
	info, _ := clientcmd.Write(*kubeconfig.Build(srv.URL, caPEM, "", kubeconfig.Credentials{}))
	settings := Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108",
		PodRoutes: constants.PodRoutesProvider}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/"+ClusterInfoName):
			json.NewEncoder(w).Encode(map[string]any{"data": map[string]string{"kubeconfig": string(info)}})
		case strings.HasSuffix(r.URL.Path, "/"+SettingsName) && r.Header.Get("Authorization") == "Bearer "+secret:
			json.NewEncoder(w).Encode(map[string]any{"data": settings.Data()})
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
	t.Cleanup(srv.Close)
	return srv, caPEM
}

func TestDiscoverChecksTheCAAndTheSecret(t *testing.T) {
	const secret = "abcdef.0123456789abcdef"
	srv, caPEM := fakeServer(t, secret)
	hash, err := pki.CAHash(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := Discover(ctx, srv.URL, pki.Token{CAHash: hash, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	// An agent learns who routes the pod ranges from what it discovers.
	if got.Settings.LeaseDurationSeconds != 40 || got.Settings.PodRoutes != constants.PodRoutesProvider || string(got.CAPEM) != string(caPEM) {
		t.Fatalf("discovered %+v", got.Settings)
	}
	for _, c := range []struct {
		name  string
		url   string
		token pki.Token
		input Input
		want  string
	}{
		{"wrong CA hash", srv.URL, pki.Token{CAHash: strings.Repeat("0", 64), Secret: secret}, InputToken, "token: the server's CA (sha256 "},
		{"wrong secret", srv.URL, pki.Token{CAHash: hash, Secret: "zzzzzz.0123456789abcdef"}, InputToken, "token: the server refused the token (401 Unauthorized): it is mistyped, expired or deleted; make one with k1m token create on a server: unauthorized"},
		{"http URL", "http://[::1]:6443", pki.Token{CAHash: hash, Secret: secret}, InputServer, `server: "http://[::1]:6443" is not the server's https URL, e.g. https://[fddf:4035:b520::1]:6443`},
	} {
		_, err := Discover(ctx, c.url, c.token)
		var je *Error
		if !errors.As(err, &je) || je.Input != c.input || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a %s error starting %q", c.name, err, c.input, c.want)
		}
	}
}

func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// mitmServer plays the man in the middle of issue 15: it serves the real
// CA followed by a CA of its own in cluster-info, and a serving
// certificate from its own CA. It records every bearer token it is sent.
type mitmServer struct {
	*httptest.Server
	realCA  *pki.Authority
	mu      sync.Mutex
	bearers []string
}

func newMITMServer(t *testing.T, bundle func(real, own []byte) []byte) *mitmServer {
	realCA, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ownCA, err := pki.LoadOrCreateCA(dir, "ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ownCA.LoadOrIssue(dir, pki.Leaf{Name: "serving", CommonName: "kube-apiserver", Server: true,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	m := &mitmServer{Server: httptest.NewUnstartedServer(nil), realCA: realCA}
	m.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	m.StartTLS()
	t.Cleanup(m.Close)
	info, _ := clientcmd.Write(*kubeconfig.Build(m.URL, bundle(realCA.CertPEM, ownCA.CertPEM), "", kubeconfig.Credentials{}))
	m.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); auth != "" {
			m.mu.Lock()
			m.bearers = append(m.bearers, auth)
			m.mu.Unlock()
		}
		json.NewEncoder(w).Encode(map[string]any{"data": map[string]string{"kubeconfig": string(info)}})
	})
	return m
}

func (m *mitmServer) tokensSeen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bearers
}

func TestDiscoverSendsNoSecretToAManInTheMiddle(t *testing.T) {
	const secret = "abcdef.0123456789abcdef"
	for _, c := range []struct {
		name   string
		bundle func(real, own []byte) []byte
		want   string
	}{
		{"real CA then his own", func(real, own []byte) []byte { return append(append([]byte{}, real...), own...) },
			"server: kube-public/cluster-info: the CA data holds 2 PEM blocks: want exactly one CERTIFICATE, the cluster CA the token pins"},
		{"his own CA alone", func(_, own []byte) []byte { return own },
			"token: the server's CA (sha256 "},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMITMServer(t, c.bundle)
			hash, _ := pki.CAHash(m.realCA.CertPEM)
			_, err := Discover(context.Background(), m.URL, pki.Token{CAHash: hash, Secret: secret})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Discover: got %v, want an error with %q", err, c.want)
			}
			if seen := m.tokensSeen(); len(seen) != 0 {
				t.Fatalf("the token reached the man in the middle: %q", seen)
			}
		})
	}
}

func TestClusterInfoWithTwoClustersIsRefused(t *testing.T) {
	real, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	cfg := kubeconfig.Build("https://[::1]:6443", real.CertPEM, "", kubeconfig.Credentials{})
	cfg.Clusters["second"] = cfg.Clusters["k1m"].DeepCopy()
	data, _ := clientcmd.Write(*cfg)
	_, err := clusterCA(string(data))
	if want := "its kubeconfig names 2 clusters, want exactly 1: is this a k1m server?"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// The agents' rebalance spread is written only when there is one (a
// cluster large enough): absent, it reads as 0, their own delay.
func TestSettingsRebalanceSpreadRoundTrip(t *testing.T) {
	s := Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108",
		PodRoutes: constants.PodRoutesK1m}
	if _, ok := s.Data()["rebalanceSpread"]; ok {
		t.Errorf("rebalanceSpread written without a spread: %v", s.Data())
	}
	s.RebalanceSpread = 64 * time.Second
	if got := s.Data()["rebalanceSpread"]; got != "1m4s" {
		t.Errorf("rebalanceSpread %q, want 1m4s", got)
	}
	if got, err := SettingsFromData(s.Data()); err != nil || got != s {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, s)
	}
	for _, v := range []string{"0s", "-1s", "soon"} {
		bad := s.Data()
		bad["rebalanceSpread"] = v
		want := `kube-public/k1m-cluster: rebalanceSpread "` + v + `": want a duration above 0s`
		if _, err := SettingsFromData(bad); err == nil || err.Error() != want {
			t.Errorf("rebalanceSpread %q: %v, want %s", v, err, want)
		}
	}
}
