package metricsload

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/proc"
)

func TestValidate(t *testing.T) {
	good := Config{Steps: []int{1000, 2000, 4000}, PodsPerNode: 30, Periods: 4}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", good, err)
	}
	bad := Config{Steps: []int{2000, 1000}, PodsPerNode: 0, Periods: 0}
	want := "--metrics-nodes 2000,1000: want ascending positive node counts, e.g. 1000,2000\n" +
		"--metrics-pods-per-node 0: want at least 1, e.g. 30\n" +
		"--metrics-periods 0: want at least 1 resolution (15s), e.g. 4"
	if err := bad.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate(%+v) =\n%v\nwant\n%s", bad, err, want)
	}
}

func TestSimulatedNodeAdvertisesItsEndpoint(t *testing.T) {
	addr := netip.MustParseAddr("fddf:4035:b520::1")
	n := SimulatedNode(7, addr, 20007)
	if n.Name != "node-0000007" || n.Labels[SimulatedLabel] != "metrics" {
		t.Errorf("name %s, labels %v", n.Name, n.Labels)
	}
	wantAddresses := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fddf:4035:b520::1"}, {Type: corev1.NodeHostName, Address: "node-0000007"}}
	if !slices.Equal(n.Status.Addresses, wantAddresses) {
		t.Errorf("addresses %v, want %v", n.Status.Addresses, wantAddresses)
	}
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != 20007 {
		t.Errorf("kubelet port %d, want 20007", got)
	}
}

// msMetrics is metrics-server's /metrics with ticks observations of
// tickSum seconds in all (each within 2 s but one within 20 s when slow)
// and failed kubelet requests.
func msMetrics(t *testing.T, ticks int, tickSum float64, slow bool, failed int) apimetrics.Snapshot {
	t.Helper()
	under2 := ticks
	if slow {
		under2--
	}
	text := fmt.Sprintf(`# TYPE metrics_server_manager_tick_duration_seconds histogram
metrics_server_manager_tick_duration_seconds_bucket{le="1"} 0
metrics_server_manager_tick_duration_seconds_bucket{le="2"} %d
metrics_server_manager_tick_duration_seconds_bucket{le="20"} %d
metrics_server_manager_tick_duration_seconds_bucket{le="+Inf"} %d
metrics_server_manager_tick_duration_seconds_sum %g
metrics_server_manager_tick_duration_seconds_count %d
# TYPE metrics_server_kubelet_request_total counter
metrics_server_kubelet_request_total{success="true"} 5000
metrics_server_kubelet_request_total{success="false"} %d
`, under2, ticks, ticks, tickSum, ticks, failed)
	m, err := apimetrics.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFillReadsTheWindow(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	before := reading{at: start, scrapes: 3000, bench: time.Second,
		metricsServerReading: metricsServerReading{usage: proc.Usage{CPU: 10 * time.Second, RSS: 100 << 20}, metrics: msMetrics(t, 10, 15, false, 2)}}
	// 60 s: 4 resolutions of 1,000 nodes, 4,000 scrapes at 300 µs each,
	// 4 cycles of 1.5 s.
	after := reading{at: start.Add(time.Minute), scrapes: 7000, bench: 4 * time.Second,
		metricsServerReading: metricsServerReading{usage: proc.Usage{CPU: 11200 * time.Millisecond, RSS: 150 << 20}, metrics: msMetrics(t, 14, 21, false, 2)}}
	s := Step{Nodes: 1000, PodsPerNode: 30, Window: time.Minute}
	s.fill(before, after, 50<<20)
	s.NodesWithMetrics = 1001
	// 100 MiB above the idle RSS over 1,000 nodes; the p99 interpolated
	// in the (1 s, 2 s] bucket holding every cycle.
	want := Step{Nodes: 1000, PodsPerNode: 30, Window: time.Minute, Scrapes: 4000, ScrapesPerNodePeriod: 1, Cores: 0.02,
		CPUPerScrape: 300 * time.Microsecond, RSS: 150 << 20, RSSPerNode: (100 << 20) / 1000, Ticks: 4, TickMean: 1500 * time.Millisecond,
		TickP99: 1990 * time.Millisecond, FailedRequests: 0, NodesWithMetrics: 1001, BenchCores: 0.05}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("fill:\n%+v\nwant\n%+v", s, want)
	}
	if !s.KeptPeriod() {
		t.Errorf("KeptPeriod() = false for %+v", s)
	}
	if got, want := s.NodesPerCore(), 50000; got != want {
		t.Errorf("NodesPerCore() = %d, want %d (15 s / 300 µs)", got, want)
	}
	if got, want := s.NodesWithinTimeout(), 33333; got != want {
		t.Errorf("NodesWithinTimeout() = %d, want %d (10 s / 300 µs)", got, want)
	}
}

func TestKeptPeriodFailsOnEachShortfall(t *testing.T) {
	kept := Step{Nodes: 1000, ScrapesPerNodePeriod: 1, TickP99: 2 * time.Second, NodesWithMetrics: 1001}
	for name, breakIt := range map[string]func(*Step){
		"a node scraped less often": func(s *Step) { s.ScrapesPerNodePeriod = 0.85 },
		"a failed request":          func(s *Step) { s.FailedRequests = 1 },
		"a cycle past the period":   func(s *Step) { s.TickP99 = Resolution },
		"a node missing its sample": func(s *Step) { s.NodesWithMetrics = 1000 },
	} {
		s := kept
		breakIt(&s)
		if s.KeptPeriod() {
			t.Errorf("%s: KeptPeriod() = true for %+v", name, s)
		}
	}
	if !kept.KeptPeriod() {
		t.Errorf("KeptPeriod() = false for %+v", kept)
	}
}

func TestResultRows(t *testing.T) {
	r := Result{Config: Config{Steps: []int{1000, 2000}, PodsPerNode: 30, Periods: 4}, Steps: []Step{
		{Flavour: "k1m", Round: 1, Nodes: 1000, PodsPerNode: 30, Window: time.Minute, Scrapes: 4000, ScrapesPerNodePeriod: 1, Cores: 0.02,
			CPUPerScrape: 300 * time.Microsecond, RSS: 150 << 20, RSSPerNode: 100 << 10, Ticks: 4, TickMean: 1500 * time.Millisecond,
			TickP99: 1980 * time.Millisecond, NodesWithMetrics: 1001, BenchCores: 0.05},
		{Flavour: "k1m", Round: 1, Nodes: 2000, PodsPerNode: 30, Window: time.Minute, Scrapes: 6000, ScrapesPerNodePeriod: 0.75, Cores: 0.03,
			CPUPerScrape: 300 * time.Microsecond, RSS: 250 << 20, RSSPerNode: 100 << 10, Ticks: 3, TickMean: 16 * time.Second,
			TickP99: 20 * time.Second, FailedRequests: 12, NodesWithMetrics: 1990, BenchCores: 0.05},
	}}
	wantCSV := [][]string{
		{"k1m", "1", "1000", "30", "60", "4000", "1", "0.02", "300", "50000", "150", "100", "4", "1.5", "1.98", "0", "1001", "0.05", "true"},
		{"k1m", "1", "2000", "30", "60", "6000", "0.75", "0.03", "300", "50000", "250", "100", "3", "16", "20", "12", "1990", "0.05", "false"},
	}
	if got := r.CSVRows(); !reflect.DeepEqual(got, wantCSV) {
		t.Errorf("CSVRows() =\n%q\nwant\n%q", got, wantCSV)
	}
	if got, want := len(r.CSVHeader()), len(wantCSV[0]); got != want {
		t.Errorf("%d CSV columns, %d values a row", got, want)
	}
	best, ok := r.largestKept()
	if !ok || best.Nodes != 1000 {
		t.Errorf("largestKept() = %d nodes, %v; want 1000, true", best.Nodes, ok)
	}
}
