package schedule

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestValidateNamesEachFlag(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Steps: []int{1000, 5000}, Pods: 1, Workers: 1, PodCPU: 10}, "<nil>"},
		{Config{Steps: []int{1000, 1000}, Pods: 1, Workers: 1, PodCPU: 10}, "--schedule-nodes 1000,1000: want ascending positive node counts, e.g. 1000,5000"},
		{Config{Steps: []int{0}, Pods: 0, Workers: 0, PodCPU: 8001}, "--schedule-nodes 0: want ascending positive node counts, e.g. 1000,5000\n--schedule-pods 0: want at least 1, e.g. 2000\n--schedule-workers 0: want at least 1, e.g. 50\n--schedule-pod-cpu 8001: want millicores from 1 to 8000 (a node's 8 CPUs), e.g. 10"},
		{Config{Pods: 1, Workers: 1, PodCPU: 10}, "--schedule-nodes is empty: want ascending positive node counts, e.g. 1000,5000"},
		{Config{Steps: []int{1000}, Pods: 1, Workers: 1, PodCPU: 10, Scores: []int{0, 5, 1}}, "<nil>"},
		{Config{Steps: []int{1000}, Pods: 1, Workers: 1, PodCPU: 10, Scores: []int{0, 101}}, "--schedule-scores 101: want percentages from 0 (upstream's adaptive default) to 100, e.g. 0,5,1 (empty: the two builds at their defaults)"},
	} {
		if got := fmt.Sprint(c.cfg.Validate()); got != c.want {
			t.Errorf("Validate(%+v) = %s, want %s", c.cfg, got, c.want)
		}
	}
}

// A pod tolerates every taint: the lease-less nodes are tainted
// not-ready once the node lifecycle controller's grace period is over.
func TestNewPodToleratesEveryTaint(t *testing.T) {
	p := NewPod("step0-00001", DefaultPodCPU)
	if want := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}; !reflect.DeepEqual(p.Spec.Tolerations, want) {
		t.Errorf("tolerations %+v, want %+v", p.Spec.Tolerations, want)
	}
	for _, taint := range []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, {Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}} {
		if !p.Spec.Tolerations[0].ToleratesTaint(&taint) {
			t.Errorf("the pod does not tolerate %v", taint)
		}
	}
}

func TestReportRowsAndSummary(t *testing.T) {
	r := &Result{Config: Config{Steps: []int{1000}, Pods: 2000, Workers: 50, PodCPU: 10}, Steps: []Step{
		{Flavour: "k1m-score-1", Round: 1, Nodes: 1000, Pods: 2000, Created: 5 * time.Second, Bound: 8 * time.Second, SchedulerCPU: time.Second, NodesUsed: 990, MostOnANode: 4},
		{Flavour: "k1m", Round: 1, Nodes: 1000, Pods: 2000, Created: 5 * time.Second, Bound: 10 * time.Second, SchedulerCPU: 3 * time.Second, NodesUsed: 1000, MostOnANode: 2},
		{Flavour: "stock", Round: 1, Nodes: 1000, Pods: 2000, Created: 5 * time.Second, Bound: 40 * time.Second, SchedulerCPU: 4 * time.Second, NodesUsed: 1000, MostOnANode: 2},
	}}
	wantRows := [][]string{
		{"k1m-score-1", "1", "1000", "2000", "8", "250", "400", "500", "990", "4"},
		{"k1m", "1", "1000", "2000", "10", "200", "400", "1500", "1000", "2"},
		{"stock", "1", "1000", "2000", "40", "50", "400", "2000", "1000", "2"},
	}
	if got := r.CSVRows(); !reflect.DeepEqual(got, wantRows) {
		t.Errorf("CSVRows = %q, want %q", got, wantRows)
	}
	want := "\n## Scheduler: 2000 pods requesting 10m CPU at each node count, created 50 at a time (median of rounds)\n\n" +
		"Nodes registered as kubelets register them, with no kubelet behind them; pods that tolerate every taint. Pods/s: pods bound per second from the first create to the last bind; created/s: the pace of the creates (when close to pods/s, the creates were the limit).\n\n" +
		"Nodes used, most on a node: how many nodes got the step's pods and the most one got (medians).\n\n" +
		"| nodes | build | pods/s | created/s | scheduler CPU-µs per pod | nodes used | most on a node |\n|---:|---|---:|---:|---:|---:|---:|\n" +
		"| 1000 | stock | 50.0 | 400.0 | 2000 | 1000 | 2 |\n" +
		"| 1000 | k1m | 200.0 | 400.0 | 1500 | 1000 | 2 |\n" +
		"| 1000 | k1m-score-1 | 250.0 | 400.0 | 500 | 990 | 4 |\n\n" +
		"1000 nodes, k1m / stock: pods/s x4.00, CPU per pod x0.75.\n"
	if got := r.Markdown(); got != want {
		t.Errorf("Markdown =\n%s\nwant\n%s", got, want)
	}
}

// fakePods lists lists[i] at the i-th List and watches with events, then
// ends the watch, as a server may at any time.
type fakePods struct {
	lists  [][]corev1.Pod
	events []*corev1.Pod
	calls  int
}

func (f *fakePods) List(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
	l := f.lists[min(f.calls, len(f.lists)-1)]
	f.calls++
	return &corev1.PodList{Items: l}, nil
}

func (f *fakePods) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	// Buffered and stopped at once: the reader gets the events, then the
	// end, and nothing is sent after it stopped reading.
	w := watch.NewFakeWithChanSize(len(f.events), false)
	for _, p := range f.events {
		w.Modify(p)
	}
	w.Stop()
	return w, nil
}

func pod(name, node string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

// A watch that ends before every pod is bound is listed and watched
// again; pods of another step and pods not bound do not count.
func TestBindsSurviveAnEndedWatch(t *testing.T) {
	bound := pod("step1-00001", "node-1")
	f := &fakePods{
		lists:  [][]corev1.Pod{{pod("step1-00000", ""), pod("step0-00000", "node-1")}, {pod("step1-00000", "node-2"), bound}},
		events: []*corev1.Pod{&bound},
	}
	b := &binds{prefix: "step1-", seen: map[string]bool{}, onNode: map[string]int{}}
	if err := b.wait(context.Background(), f, 2); err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"step1-00000": true, "step1-00001": true}; !reflect.DeepEqual(b.seen, want) || f.calls != 2 {
		t.Errorf("seen %v after %d lists, want %v after 2", b.seen, f.calls, want)
	}
	if nodes, most := b.placement(); nodes != 2 || most != 1 {
		t.Errorf("placement: %d nodes, at most %d on one; want 2 nodes, at most 1", nodes, most)
	}
}
