package apimetrics

import (
	"math"
	"reflect"
	"sort"
	"testing"

	"k1m.dev/k1m/bench/stats"
)

const sample = `# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="PUT",resource="leases",le="0.1"} 8
apiserver_request_duration_seconds_bucket{verb="PUT",resource="leases",le="1"} 10
apiserver_request_duration_seconds_bucket{verb="PUT",resource="leases",le="+Inf"} 10
apiserver_request_duration_seconds_sum{verb="PUT",resource="leases"} 1
apiserver_request_duration_seconds_count{verb="PUT",resource="leases"} 10
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="nodes",le="0.1"} 0
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="nodes",le="1"} 0
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="nodes",le="+Inf"} 2
apiserver_request_duration_seconds_sum{verb="PATCH",resource="nodes"} 5
apiserver_request_duration_seconds_count{verb="PATCH",resource="nodes"} 2
apiserver_request_duration_seconds_bucket{verb="GET",resource="nodes",le="0.1"} 0
apiserver_request_duration_seconds_bucket{verb="GET",resource="nodes",le="1"} 0
apiserver_request_duration_seconds_bucket{verb="GET",resource="nodes",le="+Inf"} 100
apiserver_request_duration_seconds_sum{verb="GET",resource="nodes"} 500
apiserver_request_duration_seconds_count{verb="GET",resource="nodes"} 100
# TYPE apiserver_request_total counter
apiserver_request_total{verb="PUT",resource="leases",code="200"} 10
apiserver_request_total{verb="PATCH",resource="nodes",code="200"} 2
apiserver_request_total{verb="PATCH",resource="nodes",subresource="status",code="200"} 3
apiserver_request_total{verb="GET",resource="nodes",code="200"} 100
`

func TestMutatingLatencySumsMutatingVerbsOnly(t *testing.T) {
	s, err := Parse(sample)
	if err != nil {
		t.Fatal(err)
	}
	all := s.MutatingLatency("")
	// 12 mutating calls: 8 <= 0.1 s, 2 in (0.1, 1], 2 above 1 s; the 100 slow GETs do not count.
	if got := stats.HistogramQuantile(0.5, all); math.Abs(got-0.1*6/8) > 1e-9 {
		t.Errorf("p50 = %v, want %v", got, 0.1*6/8)
	}
	if got := stats.HistogramQuantile(0.99, all); got != 1 {
		t.Errorf("p99 = %v, want 1 (rank in +Inf: at least the highest finite bound)", got)
	}
	leases := s.MutatingLatency("leases")
	if got := stats.HistogramQuantile(0.99, leases); got <= 0.1 || got > 1 {
		t.Errorf("leases p99 = %v, want in (0.1, 1]", got)
	}
	if got := s.Requests("PUT", "leases"); got != 10 {
		t.Errorf("Requests(PUT, leases) = %v, want 10", got)
	}
	if got := s.Requests("", "nodes"); got != 105 {
		t.Errorf("Requests(all, nodes) = %v, want 105", got)
	}
	if got := [2]float64{s.RequestsTo("PATCH", "nodes", ""), s.RequestsTo("PATCH", "nodes", "status")}; got != [2]float64{2, 3} {
		t.Errorf("RequestsTo(PATCH, nodes, \"\" and status) = %v, want [2 3]", got)
	}
}

const clusterSample = `# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="LIST",resource="pods",scope="namespace",le="1"} 3
apiserver_request_duration_seconds_bucket{verb="LIST",resource="pods",scope="namespace",le="+Inf"} 4
apiserver_request_duration_seconds_sum{verb="LIST",resource="pods",scope="namespace"} 9
apiserver_request_duration_seconds_count{verb="LIST",resource="pods",scope="namespace"} 4
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="status",scope="resource",le="1"} 5
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="status",scope="resource",le="+Inf"} 5
apiserver_request_duration_seconds_sum{verb="PATCH",resource="pods",subresource="status",scope="resource"} 1
apiserver_request_duration_seconds_count{verb="PATCH",resource="pods",subresource="status",scope="resource"} 5
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",kind="Pod",version="v1"} 7
apiserver_watch_events_total{group="discovery.k8s.io",kind="EndpointSlice",version="v1"} 3
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",kind="Pod",version="v1",le="+Inf"} 7
apiserver_watch_events_sizes_sum{group="",kind="Pod",version="v1"} 7000
apiserver_watch_events_sizes_count{group="",kind="Pod",version="v1"} 7
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.5e+08
`

func TestLatenciesWatchEventsAndGauge(t *testing.T) {
	s, err := Parse(clusterSample)
	if err != nil {
		t.Fatal(err)
	}
	lat := s.Latencies(map[string]bool{"LIST": true})
	list := Call{Verb: "LIST", Resource: "pods", Scope: "namespace"}
	want := map[Call][]stats.Bucket{list: {{UpperBound: 1, Count: 3}, {UpperBound: math.Inf(1), Count: 4}}}
	if !reflect.DeepEqual(sortedBuckets(lat), sortedBuckets(want)) {
		t.Errorf("Latencies(LIST) = %v, want %v", lat, want)
	}
	if got := list.String(); got != "LIST pods (namespace)" {
		t.Errorf("String = %q", got)
	}
	if got := (Call{Verb: "PATCH", Resource: "pods", Subresource: "status", Scope: "resource"}).String(); got != "PATCH pods/status" {
		t.Errorf("String = %q", got)
	}
	w := s.WatchEvents()
	wantW := WatchEvents{Events: map[string]float64{"Pod": 7, "EndpointSlice": 3}, Bytes: map[string]float64{"Pod": 7000}}
	if !reflect.DeepEqual(w, wantW) {
		t.Errorf("WatchEvents = %+v, want %+v", w, wantW)
	}
	if got := s.Gauge("go_memstats_heap_inuse_bytes"); got != 1.5e8 {
		t.Errorf("Gauge = %v", got)
	}
	if got := s.Gauge("absent"); !math.IsNaN(got) {
		t.Errorf("Gauge(absent) = %v, want NaN", got)
	}
}

func sortedBuckets(m map[Call][]stats.Bucket) map[Call][]stats.Bucket {
	out := map[Call][]stats.Bucket{}
	for k, v := range m {
		v = append([]stats.Bucket(nil), v...)
		sort.Slice(v, func(i, j int) bool { return v[i].UpperBound < v[j].UpperBound })
		out[k] = v
	}
	return out
}

func TestHistogramAndSumAddEverySeries(t *testing.T) {
	s, err := Parse(`# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{le="1"} 2
kubeproxy_network_programming_duration_seconds_bucket{le="+Inf"} 3
kubeproxy_network_programming_duration_seconds_sum 2
kubeproxy_network_programming_duration_seconds_count 3
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 4
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_total counter
kubeproxy_sync_proxy_rules_endpoint_changes_total{a="x"} 5
kubeproxy_sync_proxy_rules_endpoint_changes_total{a="y"} 6
`)
	if err != nil {
		t.Fatal(err)
	}
	got := sortedBuckets(map[Call][]stats.Bucket{{}: s.Histogram("kubeproxy_network_programming_duration_seconds")})[Call{}]
	want := []stats.Bucket{{UpperBound: 1, Count: 2}, {UpperBound: math.Inf(1), Count: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Histogram = %v, want %v", got, want)
	}
	sums := [3]float64{s.Sum("kubeproxy_sync_proxy_rules_endpoint_changes_pending"), s.Sum("kubeproxy_sync_proxy_rules_endpoint_changes_total"), s.Sum("absent")}
	if sums != [3]float64{4, 11, 0} {
		t.Errorf("Sum of the gauge, the counter and an absent family = %v, want [4 11 0]", sums)
	}
}

func TestSumWhereMatchesEveryLabel(t *testing.T) {
	s, err := Parse(`# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{resource="nodes",scope="cluster",verb="WATCH"} 4
apiserver_longrunning_requests{resource="nodes",scope="resource",verb="WATCH"} 5
apiserver_longrunning_requests{resource="pods",scope="cluster",verb="WATCH"} 7
`)
	if err != nil {
		t.Fatal(err)
	}
	got := [4]float64{
		s.SumWhere("apiserver_longrunning_requests", map[string]string{"resource": "nodes", "scope": "cluster", "verb": "WATCH"}),
		s.SumWhere("apiserver_longrunning_requests", map[string]string{"resource": "nodes"}),
		s.SumWhere("apiserver_longrunning_requests", nil),
		s.SumWhere("apiserver_longrunning_requests", map[string]string{"resource": "leases"}),
	}
	if want := [4]float64{4, 9, 16, 0}; got != want {
		t.Errorf("SumWhere = %v, want %v", got, want)
	}
}
