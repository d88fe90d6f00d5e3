package join

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/pki"

	"k8s.io/client-go/tools/clientcmd"
)

func TestSettingsRoundTrip(t *testing.T) {
	s := Settings{RenewInterval: 30 * time.Second, LeaseDurationSeconds: 120, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108"}
	got, err := SettingsFromData(s.Data())
	if err != nil || got != s {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	bad := s.Data()
	delete(bad, "clusterDNS")
	if _, err := SettingsFromData(bad); err == nil || !strings.Contains(err.Error(), "clusterDNS") {
		t.Fatalf("want an error naming clusterDNS, got %v", err)
	}
}

// fakeServer serves cluster-info and k1m-cluster the way kube-apiserver
// does, accepting secret as the only bearer token for k1m-cluster.
func fakeServer(t *testing.T, secret string) (*httptest.Server, []byte) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	caPEM := certPEM(srv)
	info, _ := clientcmd.Write(*kubeconfig.Build(srv.URL, caPEM, "", kubeconfig.Credentials{}))
	settings := Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108"}
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
	if got.Settings.LeaseDurationSeconds != 40 || string(got.CAPEM) != string(caPEM) {
		t.Fatalf("discovered %+v", got.Settings)
	}
	_, err = Discover(ctx, srv.URL, pki.Token{CAHash: strings.Repeat("0", 64), Secret: secret})
	if err == nil || !strings.Contains(err.Error(), "--token: the server's CA") {
		t.Fatalf("wrong CA hash: want a --token error, got %v", err)
	}
	_, err = Discover(ctx, srv.URL, pki.Token{CAHash: hash, Secret: "zzzzzz.0123456789abcdef"})
	if err == nil || !strings.Contains(err.Error(), "--token: the server refused") {
		t.Fatalf("wrong secret: want a --token refusal, got %v", err)
	}
	_, err = Discover(ctx, "http://[::1]:6443", pki.Token{CAHash: hash, Secret: secret})
	if err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("http URL: want a --server error, got %v", err)
	}
}

func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}
