package apimetrics

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/stats"
)

const queues = `# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="deployment",le="0.01"} 3
workqueue_queue_duration_seconds_bucket{name="deployment",le="+Inf"} 4
workqueue_queue_duration_seconds_sum{name="deployment"} 1
workqueue_queue_duration_seconds_count{name="deployment"} 4
workqueue_queue_duration_seconds_bucket{name="replicaset",le="0.01"} 5
workqueue_queue_duration_seconds_bucket{name="replicaset",le="+Inf"} 5
workqueue_queue_duration_seconds_sum{name="replicaset"} 0.01
workqueue_queue_duration_seconds_count{name="replicaset"} 5
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="deployment"} 4
workqueue_adds_total{name="replicaset"} 5
`

func TestHistogramsByAndSumsByKeyOnTheLabel(t *testing.T) {
	s, err := Parse(queues)
	if err != nil {
		t.Fatal(err)
	}
	got := s.HistogramsBy("workqueue_queue_duration_seconds", "name")
	for _, b := range got {
		sort.Slice(b, func(i, j int) bool { return b[i].UpperBound < b[j].UpperBound })
	}
	want := map[string][]stats.Bucket{
		"deployment": {{UpperBound: 0.01, Count: 3}, {UpperBound: math.Inf(1), Count: 4}},
		"replicaset": {{UpperBound: 0.01, Count: 5}, {UpperBound: math.Inf(1), Count: 5}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("HistogramsBy = %v, want %v", got, want)
	}
	if got, want := s.SumsBy("workqueue_adds_total", "name"), map[string]float64{"deployment": 4, "replicaset": 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("SumsBy = %v, want %v", got, want)
	}
	if got := s.HistogramsBy("absent", "name"); len(got) != 0 {
		t.Errorf("HistogramsBy(absent) = %v, want none", got)
	}
}

func TestScrapeComponentReadsTheSecurePortAndNamesAFailure(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(queues))
	}))
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "https://")
	cfg := &rest.Config{Host: "https://elsewhere:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not this server's CA")}}
	s, err := ScrapeComponent(context.Background(), cfg, hostPort)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SumsBy("workqueue_adds_total", "name")["replicaset"]; got != 5 {
		t.Errorf("replicaset adds = %v, want 5", got)
	}
	status = http.StatusForbidden
	_, err = ScrapeComponent(context.Background(), cfg, hostPort)
	if want := "reading https://" + hostPort + "/metrics: 403 Forbidden: " + strings.TrimSpace(queues); err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}
