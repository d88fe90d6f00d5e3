package apimetrics

import (
	"math"
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
