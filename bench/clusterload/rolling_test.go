package clusterload

import (
	"reflect"
	"testing"
	"time"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/proc"
)

func listMetrics(t *testing.T, objects, bytes string) apimetrics.Snapshot {
	t.Helper()
	m, err := apimetrics.Parse(`# TYPE apiserver_cache_list_returned_objects_total counter
apiserver_cache_list_returned_objects_total{resource_prefix="/pods"} ` + objects + `
# TYPE apiserver_response_sizes histogram
apiserver_response_sizes_bucket{verb="LIST",resource="pods",le="+Inf"} 10
apiserver_response_sizes_sum{verb="LIST",resource="pods"} ` + bytes + `
apiserver_response_sizes_count{verb="LIST",resource="pods"} 10
`)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The restarted server's figures are its new processes' and counters'
// whole values; the others' are what they added over the restart.
func TestServerRestartFillReadsEachServersShare(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	end := start.Add(10 * time.Second)
	before := []reading{
		{at: start, metrics: listMetrics(t, "1000", "1048576"), members: []proc.Member{{PID: 10, Name: "k1m server", Own: true}}, usage: map[int]proc.Usage{10: {CPU: 100 * time.Second}}},
		{at: start, metrics: listMetrics(t, "5000", "2097152"), members: []proc.Member{{PID: 20, Name: "k1m server", Own: true}}, usage: map[int]proc.Usage{20: {CPU: 50 * time.Second}}},
	}
	after := []reading{
		{at: end, metrics: listMetrics(t, "1500", "2097152"), members: []proc.Member{{PID: 10, Name: "k1m server", Own: true}}, usage: map[int]proc.Usage{10: {CPU: 105 * time.Second}}},
		{at: end, metrics: listMetrics(t, "700", "3145728"), members: []proc.Member{{PID: 21, Name: "k1m server", Own: true}},
			usage: map[int]proc.Usage{21: {CPU: 8 * time.Second, PeakRSS: 900 << 20}}},
	}
	sr := ServerRestart{Server: 2}
	sr.fill(before, after)
	want := ServerRestart{Server: 2, CacheObjects: []float64{500, 700}, ListMiB: []float64{1, 3}, Cores: []float64{0.5, 0.8}, PeakRSS: 900 << 20}
	if !reflect.DeepEqual(sr, want) {
		t.Errorf("fill:\n%+v\nwant\n%+v", sr, want)
	}
}

func TestRollingCSVIsARowPerServerRead(t *testing.T) {
	r := Result{Steps: []Step{{Flavour: "k1m", Round: 1, Nodes: 500, Rolling: []ServerRestart{
		{Server: 1, Up: 20 * time.Second, Settled: 50 * time.Second, Relists: 3000, CacheObjects: []float64{400, 10}, ListMiB: []float64{60, 1}, Cores: []float64{0.9, 0.4},
			PeakRSS: 2 << 30, WorstMutating: CallP99{Call: "PUT leases", P99: 300 * time.Millisecond}, LateHeartbeats: 7},
		{Server: 2, Error: "restarting server 2: boom"},
	}}}}
	want := [][]string{
		{"flavour", "round", "nodes", "restarted", "up_s", "settled_s", "relists", "server", "cache_objects", "list_mib", "cores",
			"restarted_peak_rss_mib", "worst_mutating_call", "worst_mutating_p99_ms", "late_heartbeats", "not_ready", "error"},
		{"k1m", "1", "500", "1", "20", "50", "3000", "1", "400", "60", "0.9", "2048", "PUT leases", "300", "7", "0", ""},
		{"k1m", "1", "500", "1", "20", "50", "3000", "2", "10", "1", "0.4", "2048", "PUT leases", "300", "7", "0", ""},
		{"k1m", "1", "500", "2", "0", "0", "0", "1", "", "", "", "0", "", "0", "0", "0", "restarting server 2: boom"},
	}
	if got := r.RollingCSV(); !reflect.DeepEqual(got, want) {
		t.Errorf("RollingCSV:\n%q\nwant\n%q", got, want)
	}
}
