package leaseflood

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestNewWorkersSpreadOverTheConfigs(t *testing.T) {
	configs := []*rest.Config{{Host: "https://a"}, {Host: "https://b"}, {Host: "https://c"}}
	var leases []*coordinationv1.Lease
	for i := 0; i < 640; i++ {
		leases = append(leases, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i)}})
	}
	workers, err := newWorkers(configs, 64, leases)
	if err != nil {
		t.Fatal(err)
	}
	perConfig := make([]int, len(configs))
	for i, w := range workers {
		perConfig[w.via]++
		if w.via != i%3 {
			t.Errorf("worker %d goes through config %d, want %d", i, w.via, i%3)
		}
		if len(w.leases) != 10 {
			t.Errorf("worker %d owns %d Leases, want 10", i, len(w.leases))
		}
	}
	if want := []int{22, 21, 21}; !reflect.DeepEqual(perConfig, want) {
		t.Errorf("workers per config %v, want %v", perConfig, want)
	}
	// One config (the lease scenario): every worker through it.
	one, err := newWorkers(configs[:1], 64, leases)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range one {
		if w.via != 0 {
			t.Errorf("one config: worker %d goes through config %d", i, w.via)
		}
	}
}

func TestSummarizeCountsUpdatesPerConfig(t *testing.T) {
	ms := time.Millisecond
	workers := []renewer{
		&worker{via: 0, latencies: []time.Duration{ms, 2 * ms, 3 * ms}, conflicts: 1},
		&nodeWorker{via: 1, latencies: []time.Duration{4 * ms}, errors: 2},
		&worker{via: 0, latencies: []time.Duration{5 * ms}},
	}
	r := summarize(workers, 3, 2*time.Second, 40, 4)
	if r.Updates != 5 || !reflect.DeepEqual(r.UpdatesBy, []int64{4, 1, 0}) || r.Conflicts != 1 || r.Errors != 2 {
		t.Errorf("updates %d by config %v, conflicts %d, errors %d; want 5, [4 1 0], 1, 2", r.Updates, r.UpdatesBy, r.Conflicts, r.Errors)
	}
	if r.Rate != 2.5 || r.WatchEventRate != 5 || r.Latency.P50 != 3*ms {
		t.Errorf("rate %v, watch events %v per watcher, p50 %v; want 2.5, 5, 3ms", r.Rate, r.WatchEventRate, r.Latency.P50)
	}
}

// The node status patch moves the four heartbeats and nothing else, in
// the form the kubelet sends (the list order directive, then each
// condition by its merge key).
func TestHeartbeatPatch(t *testing.T) {
	registered := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	got, err := HeartbeatPatch(NewNode("node-0000007", 7, registered), registered.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":{"$setElementOrder/conditions":[{"type":"MemoryPressure"},{"type":"DiskPressure"},{"type":"PIDPressure"},{"type":"Ready"}],` +
		`"conditions":[{"lastHeartbeatTime":"2026-11-24T10:00:10Z","type":"MemoryPressure"},{"lastHeartbeatTime":"2026-11-24T10:00:10Z","type":"DiskPressure"},` +
		`{"lastHeartbeatTime":"2026-11-24T10:00:10Z","type":"PIDPressure"},{"lastHeartbeatTime":"2026-11-24T10:00:10Z","type":"Ready"}]}}`
	if string(got) != want {
		t.Errorf("HeartbeatPatch =\n %s\nwant\n %s", got, want)
	}
}

func TestValidateObject(t *testing.T) {
	cfg := Config{Object: "pods", Leases: 10, Workers: 1, Duration: time.Second}
	want := "leaseflood: object \"pods\": want one of lease, node-status"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}
	for _, o := range append([]string{""}, Objects...) {
		cfg.Object = o
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate of object %q: %v", o, err)
		}
	}
}

func TestInParallelDoesEachIndexOnceAndStopsAtAnError(t *testing.T) {
	var mu sync.Mutex
	done := map[int]int{}
	err := InParallel(100, 8, func(i int) error {
		mu.Lock()
		done[i]++
		mu.Unlock()
		return nil
	})
	if err != nil || len(done) != 100 {
		t.Fatalf("InParallel = %v with %d indexes done, want nil and 100", err, len(done))
	}
	for i, n := range done {
		if n != 1 {
			t.Errorf("index %d done %d times", i, n)
		}
	}
	boom := errors.New("boom")
	var calls atomic.Int64
	err = InParallel(1000, 1, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() != 4 {
		t.Errorf("InParallel = %v after %d calls, want boom after 4", err, calls.Load())
	}
}
