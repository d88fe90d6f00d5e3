package clusterload

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

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
# TYPE apiserver_init_events_total counter
apiserver_init_events_total{resource="pods"} 700
apiserver_init_events_total{resource="services"} 300
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",version="v1",kind="Pod",le="+Inf"} 10
apiserver_watch_events_sizes_sum{group="",version="v1",kind="Pod"} 3145728
apiserver_watch_events_sizes_count{group="",version="v1",kind="Pod"} 10
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
		ListBytes: map[string]float64{"services": 2 << 20, "pods": 1 << 20}, InitEvents: 1000, WatchBytes: 3 << 20,
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

// fakeListWatch is a listWatch whose watch call records its options and
// returns w.
func fakeListWatch(w watch.Interface, got *metav1.ListOptions) listWatch {
	return listWatch{watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) { *got = o; return w, nil }}
}

func TestStreamListReadsTheInitialEventsAndKeepsTheWatch(t *testing.T) {
	w := watch.NewFakeWithChanSize(4, false)
	pod := func(name, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	w.Add(pod("a", "5"))
	w.Add(pod("b", "7"))
	w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	w.Modify(pod("a", "10"))
	var opts metav1.ListOptions
	var seen []string
	rv, stream, err := streamList(context.Background(), fakeListWatch(w, &opts), func(ev watch.Event) {
		seen = append(seen, string(ev.Type)+" "+ev.Object.(*corev1.Pod).Name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if rv != "9" || stream != watch.Interface(w) || !slices.Equal(seen, []string{"ADDED a", "ADDED b"}) {
		t.Errorf("streamList = %q, %v, saw %v; want 9, the watch, [ADDED a ADDED b]", rv, stream, seen)
	}
	if next := <-stream.ResultChan(); next.Type != watch.Modified {
		t.Errorf("the watch after the initial events sent %s first, want the change after them", next.Type)
	}
	timeout := opts.TimeoutSeconds
	opts.TimeoutSeconds = nil
	yes := true
	want := metav1.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}
	if !reflect.DeepEqual(opts, want) || timeout == nil || *timeout < 300 || *timeout >= 600 {
		t.Errorf("watch options %+v (timeout %v), want %+v and a timeout of 5 to 10 minutes", opts, timeout, want)
	}
}

func TestStreamListFailsWithoutTheEndOfItsInitialEvents(t *testing.T) {
	for name, send := range map[string]func(w *watch.FakeWatcher){
		"an error": func(w *watch.FakeWatcher) {
			w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"})
		},
		"the end of the watch": func(w *watch.FakeWatcher) { w.Stop() },
	} {
		w := watch.NewFakeWithChanSize(2, false)
		w.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "5"}})
		send(w)
		var opts metav1.ListOptions
		if rv, stream, err := streamList(context.Background(), fakeListWatch(w, &opts), nil); err == nil || stream != nil || rv != "" {
			t.Errorf("%s: streamList = %q, %v, %v; want an error", name, rv, stream, err)
		}
	}
}
