package kubeletsim

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"k1m.dev/k1m/pkg/pki"
)

func TestValidate(t *testing.T) {
	good := Config{Addr: netip.MustParseAddr("::1"), FirstPort: 20000, PodsPerNode: 30}
	if err := good.Validate(4000); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", good, err)
	}
	bad := Config{FirstPort: 65000, PodsPerNode: -1}
	want := "address: want the address the simulated kubelets serve on\n" +
		"first port 65000 for 1000 nodes: want 0 (any) or ports from 1024 to 65535\n" +
		"pods per node -1: want 0 or more"
	if err := bad.Validate(1000); err == nil || err.Error() != want {
		t.Errorf("Validate(%+v) = %v, want\n%s", bad, err, want)
	}
}

// series is one sample as the test reads it: name, labels, value and
// timestamp.
type series struct {
	Name   string
	Labels string
	Value  float64
	Ms     int64
}

func parse(t *testing.T, text []byte) ([]string, []series) {
	t.Helper()
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parsing:\n%s\n%v", text, err)
	}
	var names []string
	var out []series
	for name, f := range families {
		names = append(names, name)
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += fmt.Sprintf("%s=%s,", l.GetName(), l.GetValue())
			}
			out = append(out, series{name, labels, value(f.GetType(), m), m.GetTimestampMs()})
		}
	}
	slices.Sort(names)
	slices.SortFunc(out, func(a, b series) int {
		if a.Name != b.Name {
			return cmpString(a.Name, b.Name)
		}
		return cmpString(a.Labels, b.Labels)
	})
	return names, out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	if typ == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

func TestWriteIsTheKubeletsResourceMetrics(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	now := start.Add(9 * time.Second)
	var b bytes.Buffer
	if err := Write(&b, 3, 2, start, now); err != nil {
		t.Fatal(err)
	}
	names, got := parse(t, b.Bytes())
	wantNames := []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_start_time_seconds",
		"container_swap_usage_bytes", "node_cpu_usage_seconds_total", "node_memory_working_set_bytes", "node_swap_usage_bytes",
		"pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes", "pod_swap_usage_bytes", "resource_scrape_error"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("families %q, want %q", names, wantNames)
	}
	ms := now.UnixMilli()
	container := func(pod string) string { return "container=app,namespace=k1m-bench-metrics,pod=" + pod + "," }
	pod := func(pod string) string { return "namespace=k1m-bench-metrics,pod=" + pod + "," }
	// 10 s of use (9 s since start, and 1 more so that no counter is 0).
	want := []series{
		{"container_cpu_usage_seconds_total", container("app-0000003-000"), 0.1, ms},
		{"container_cpu_usage_seconds_total", container("app-0000003-001"), 0.1, ms},
		{"container_memory_working_set_bytes", container("app-0000003-000"), 50 << 20, ms},
		{"container_memory_working_set_bytes", container("app-0000003-001"), 50 << 20, ms},
		{"container_start_time_seconds", container("app-0000003-000"), 1_800_000_000, ms},
		{"container_start_time_seconds", container("app-0000003-001"), 1_800_000_000, ms},
		{"container_swap_usage_bytes", container("app-0000003-000"), 0, ms},
		{"container_swap_usage_bytes", container("app-0000003-001"), 0, ms},
		{"node_cpu_usage_seconds_total", "", 0.4, ms},
		{"node_memory_working_set_bytes", "", 4 * 50 << 20, ms},
		{"node_swap_usage_bytes", "", 0, ms},
		{"pod_cpu_usage_seconds_total", pod("app-0000003-000"), 0.1, ms},
		{"pod_cpu_usage_seconds_total", pod("app-0000003-001"), 0.1, ms},
		{"pod_memory_working_set_bytes", pod("app-0000003-000"), 50 << 20, ms},
		{"pod_memory_working_set_bytes", pod("app-0000003-001"), 50 << 20, ms},
		{"pod_swap_usage_bytes", pod("app-0000003-000"), 0, ms},
		{"pod_swap_usage_bytes", pod("app-0000003-001"), 0, ms},
		{"resource_scrape_error", "", 0, 0},
	}
	if !slices.Equal(got, want) {
		t.Errorf("series\n%v\nwant\n%v", got, want)
	}
}

// servingCert is a kubelet serving certificate for ::1 from a fresh CA,
// and a pool trusting that CA.
func servingCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "kubelet-serving-ca", "kubelet serving CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "system:node:simulated", IPs: []net.IP{net.IPv6loopback}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return cert, pool
}

func TestEndpointsServeEachNodeOnItsOwnPort(t *testing.T) {
	cert, pool := servingCert(t)
	e := New(Config{Addr: netip.MustParseAddr("::1"), PodsPerNode: 1}, cert)
	defer e.Close()
	if err := e.Add(2); err != nil {
		t.Fatal(err)
	}
	if err := e.Add(3); err != nil { // one more, the first two kept
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(node int, path string) (int, string) {
		t.Helper()
		url := "https://" + net.JoinHostPort("::1", strconv.Itoa(e.Port(node))) + path
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	for _, node := range []int{2, 0, 2} {
		if code, body := get(node, Path); code != http.StatusOK || !bytes.Contains([]byte(body), []byte(PodName(node, 0))) {
			t.Errorf("node %d: %d, want 200 and its pod %s in\n%s", node, code, PodName(node, 0), body)
		}
	}
	if code, _ := get(1, "/metrics/cadvisor"); code != http.StatusNotFound {
		t.Errorf("another path: %d, want 404", code)
	}
	if got, want := e.Scrapes(), []int64{1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("Scrapes() = %v, want %v", got, want)
	}
	if err := e.Wait(context.Background(), 3, 1, 0); err == nil ||
		err.Error() != "every simulated node's kubelet endpoint scraped 1 times: timed out after 0s: 2 of 3 nodes were" {
		t.Errorf("Wait with node 1 never scraped = %v", err)
	}
	get(1, Path)
	if err := e.Wait(context.Background(), 3, 1, time.Minute); err != nil {
		t.Errorf("Wait with every node scraped once = %v", err)
	}
}

func TestScrapedAtLeast(t *testing.T) {
	scrapes := []int64{3, 1, 2, 0}
	for _, c := range []struct {
		nodes int
		times int64
		want  int
	}{{4, 1, 3}, {4, 2, 2}, {2, 2, 1}, {6, 0, 4}} {
		if got := ScrapedAtLeast(scrapes, c.nodes, c.times); got != c.want {
			t.Errorf("ScrapedAtLeast(%v, %d, %d) = %d, want %d", scrapes, c.nodes, c.times, got, c.want)
		}
	}
}
