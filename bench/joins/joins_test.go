package joins

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/apis/certificates"

	"k1m.dev/k1m/bench/stats"
)

func TestValidateNamesEachFlag(t *testing.T) {
	err := Config{Joins: 0, Workers: 0}.Validate()
	want := "--joins 0: want at least 1, e.g. 1000\n--joins-workers 0: want at least 1, e.g. 50"
	if fmt.Sprint(err) != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
	if err := (Config{Joins: 1, Workers: 1}).Validate(); err != nil {
		t.Errorf("a valid size refused: %v", err)
	}
}

// The simulated request is a kubelet's: the check the approver runs
// (upstream's ValidateKubeletClientCSR) passes it with the usages Join
// asks for.
func TestClientRequestIsAKubeletClientRequest(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	data, err := clientRequest(key, "sim-1")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := certificates.ValidateKubeletClientCSR(req, sets.NewString("digital signature", "client auth")); err != nil {
		t.Errorf("not a kubelet client request: %v", err)
	}
}

func TestBootstrapIsTheTokenAlone(t *testing.T) {
	admin := &rest.Config{Host: "https://[fddf::1]:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}
	got := Bootstrap(admin, "abcdef.0123456789abcdef")
	if got.Host != admin.Host || string(got.CAData) != "ca" || got.CertData != nil || got.KeyData != nil || got.BearerToken != "abcdef.0123456789abcdef" {
		t.Errorf("Bootstrap = host %s, CA %q, cert %q, key %q, token %q; want the admin's host and CA, no client certificate, the token",
			got.Host, got.CAData, got.CertData, got.KeyData, got.BearerToken)
	}
}

func TestReportRowsAndSummary(t *testing.T) {
	lat := stats.Latency{Count: 1000, P50: 800 * time.Millisecond, P90: time.Second, P99: 2 * time.Second, Max: 3 * time.Second}
	r := &Result{Config: Config{Joins: 1000, Workers: 50}, Trials: []Trial{
		{Flavour: "stock", Round: 1, Joins: 1000, Elapsed: 50 * time.Second, Latency: lat},
		{Flavour: "k1m", Round: 1, Joins: 999, Failed: 1, Errors: []string{"node sim-k1m-1-7: CSR csr-x: timed out"}, Elapsed: 40 * time.Second, Latency: lat},
	}}
	wantRows := [][]string{
		{"stock", "1", "1000", "0", "50", "50", "20", "800", "1000", "2000", "3000"},
		{"k1m", "1", "999", "1", "50", "40", "24.975", "800", "1000", "2000", "3000"},
	}
	if got := r.CSVRows(); !reflect.DeepEqual(got, wantRows) {
		t.Errorf("CSVRows = %q, want %q", got, wantRows)
	}
	want := "\n## Joins: 1000 simulated nodes join one fresh `k1m server`, 50 at a time\n\n" +
		"Each node: a key, a kubelet client CSR with the join token, a watch until it is approved (k1m's approver) and signed (kube-controller-manager).\n\n" +
		"| build | round | joined | failed | took | joins/s | p50 | p99 | max |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n" +
		"| stock | 1 | 1000 | 0 | 50s | 20.0 | 800ms | 2s | 3s |\n" +
		"| k1m | 1 | 999 | 1 | 40s | 25.0 | 800ms | 2s | 3s |\n" +
		"\nMedian joins/s: k1m 25.0, stock 20.0 (x1.25).\n" +
		"\n- k1m round 1 failure: node sim-k1m-1-7: CSR csr-x: timed out\n"
	if got := r.Markdown(); got != want {
		t.Errorf("Markdown =\n%s\nwant\n%s", got, want)
	}
}
