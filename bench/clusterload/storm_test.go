package clusterload

import (
	"reflect"
	"testing"
	"time"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proc"
)

func TestStormFillReadsTheNewProcesses(t *testing.T) {
	metrics, err := apimetrics.Parse(`# TYPE apiserver_cache_list_returned_objects_total counter
apiserver_cache_list_returned_objects_total{resource_prefix="/pods"} 3000
apiserver_cache_list_returned_objects_total{resource_prefix="/services"} 500
# TYPE apiserver_storage_list_returned_objects_total counter
apiserver_storage_list_returned_objects_total{resource="nodes"} 1000
# TYPE apiserver_response_sizes histogram
apiserver_response_sizes_bucket{verb="LIST",resource="services",le="+Inf"} 100
apiserver_response_sizes_sum{verb="LIST",resource="services"} 2097152
apiserver_response_sizes_count{verb="LIST",resource="services"} 100
apiserver_response_sizes_bucket{verb="LIST",resource="pods",le="+Inf"} 100
apiserver_response_sizes_sum{verb="LIST",resource="pods"} 1048576
apiserver_response_sizes_count{verb="LIST",resource="pods"} 100
apiserver_response_sizes_bucket{verb="GET",resource="pods",le="+Inf"} 10
apiserver_response_sizes_sum{verb="GET",resource="pods"} 99999999
apiserver_response_sizes_count{verb="GET",resource="pods"} 10
`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_800_000_000, 0)
	after := reading{at: start.Add(10 * time.Second), metrics: metrics, relists: 1300,
		members:   []proc.Member{{PID: 10, Name: "k1m server", Own: true}, {PID: 11, Name: "containerd"}},
		usage:     map[int]proc.Usage{10: {CPU: 15 * time.Second, RSS: 900 << 20, PeakRSS: 1200 << 20}, 11: {CPU: time.Second, RSS: 50 << 20, PeakRSS: 60 << 20}},
		heartbeat: nodesim.Stats{Late: 250}}
	var st Storm
	st.Back = 10 * time.Second
	st.fill(start, nodesim.Stats{Late: 50}, 100, after)
	want := Storm{Back: 10 * time.Second, Relists: 1200, CacheObjects: 3500, StorageObjects: 1000,
		ListBytes: map[string]float64{"services": 2 << 20, "pods": 1 << 20},
		Processes: []Component{{Name: "k1m server", Count: 1, Cores: 1.5, RSS: 900 << 20}, {Name: "containerd", Count: 1, Cores: 0.1, RSS: 50 << 20}},
		PeakRSS:   map[string]int64{"k1m server": 1200 << 20, "containerd": 60 << 20}, LateHeartbeats: 200}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("fill:\n%+v\nwant\n%+v", st, want)
	}
	if got, want := st.TotalListBytes(), float64(3<<20); got != want {
		t.Errorf("TotalListBytes() = %v, want %v", got, want)
	}
	if got, want := st.largestLists(1), "services 2.0 MiB"; got != want {
		t.Errorf("largestLists(1) = %q, want %q", got, want)
	}
	if name, peak := st.peakRSS(); name != "k1m server" || peak != 1200<<20 {
		t.Errorf("peakRSS() = %s, %d", name, peak)
	}
	// 1.6 cores for 10 s over 1,000 nodes.
	if got, want := st.CPUPerNode(1000), 16*time.Millisecond; got != want {
		t.Errorf("CPUPerNode(1000) = %v, want %v", got, want)
	}
}
