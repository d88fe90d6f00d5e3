// Package schedule measures kube-scheduler on many nodes, as upstream's
// scheduler_perf does it: Node objects registered as kubelets register
// them (leaseflood.NewNode: Ready, 8 CPUs, 110 pods) but with no kubelet
// behind them, and pods created at a steady pace that tolerate every
// taint (the node lifecycle controller taints lease-less nodes
// not-ready after its grace period; scheduling, not readiness, is what is
// measured). Each step registers nodes up to its count, creates the pods
// and waits until the scheduler has bound every one, reading the
// scheduler process's CPU over the step.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
)

// Defaults: upstream's scheduler_perf sizes (1,000 and 5,000 nodes), 2,000
// pods a step, created 50 at a time.
var DefaultSteps = []int{1000, 5000}

const (
	DefaultPods    = 2000
	DefaultWorkers = 50
	// DefaultPodCPU is a pod's CPU request in millicores: small enough
	// that the resource scores (whole points per 1% of a node's 8 CPUs)
	// cannot tell a node with a few such pods from an empty one.
	DefaultPodCPU = 10
	// Namespace holds the pods.
	Namespace = "k1m-bench-schedule"
	// BindTimeout bounds a step's wait for its last pod to be bound.
	BindTimeout = 10 * time.Minute
)

// Config is the scenario's size.
type Config struct {
	Steps   []int // node counts, ascending
	Pods    int   // pods scheduled at each step
	Workers int   // pod creates in flight
	// PodCPU is each pod's CPU request in millicores (nodes have 8,000).
	PodCPU int
	// Scores, when set, replaces the two builds by the k1m build at each
	// of these percentages of nodes to score (ScoreArgs; 0 is upstream's
	// adaptive default).
	Scores []int `json:",omitempty"`
}

// ScoreArgs are the `k1m server` flags that set kube-scheduler's
// percentageOfNodesToScore to percent.
func ScoreArgs(percent int) []string {
	return []string{fmt.Sprintf("--scheduler-percentage-of-nodes-to-score=%d", percent)}
}

// ScoreVariant names the k1m build's server at percent.
func ScoreVariant(percent int) string {
	if percent == 0 {
		return "k1m-score-adaptive"
	}
	return fmt.Sprintf("k1m-score-%d", percent)
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	errs := []error{stats.CheckAscending("--schedule-nodes", "node counts", "1000,5000", c.Steps)}
	if c.Pods < 1 {
		errs = append(errs, fmt.Errorf("--schedule-pods %d: want at least 1, e.g. %d", c.Pods, DefaultPods))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("--schedule-workers %d: want at least 1, e.g. %d", c.Workers, DefaultWorkers))
	}
	if c.PodCPU < 1 || c.PodCPU > 8000 {
		errs = append(errs, fmt.Errorf("--schedule-pod-cpu %d: want millicores from 1 to 8000 (a node's 8 CPUs), e.g. %d", c.PodCPU, DefaultPodCPU))
	}
	errs = append(errs, stats.CheckEach("--schedule-scores", c.Scores, func(p int) bool { return p >= 0 && p <= 100 },
		"want percentages from 0 (upstream's adaptive default) to 100, e.g. 0,5,1 (empty: the two builds at their defaults)"))
	return errors.Join(errs...)
}

// Step is one node count's measurement.
type Step struct {
	Flavour string
	Round   int
	Nodes   int
	Pods    int // bound
	// Created is from the first create to the last; Bound from the first
	// create to the last bind (the scheduler's throughput is Pods/Bound
	// when it, not the creates, is the slower).
	Created, Bound time.Duration
	// SchedulerCPU is the scheduler process's CPU over the step.
	SchedulerCPU time.Duration
	// NodesUsed is how many nodes got one of the step's pods, and
	// MostOnANode the most any one got: how evenly the scheduler spread
	// them when it scores a share of the nodes.
	NodesUsed, MostOnANode int
}

// PodsPerSecond is the pods bound per second, from the first create.
func (s Step) PodsPerSecond() float64 { return stats.Rate(int64(s.Pods), s.Bound) }

// CreatedPerSecond is the pace the pods were created at.
func (s Step) CreatedPerSecond() float64 { return stats.Rate(int64(s.Pods), s.Created) }

// CPUPerPod is the scheduler's CPU per bound pod, in microseconds.
func (s Step) CPUPerPod() float64 {
	return stats.Per(float64(s.SchedulerCPU.Microseconds()), int64(s.Pods))
}

// Line is a step's one-line summary.
func (s Step) Line() string {
	return fmt.Sprintf("%d nodes: %d pods bound in %s (%.0f pods/s; created at %.0f/s), scheduler %.0f CPU-µs per pod; on %d nodes, at most %d on one",
		s.Nodes, s.Pods, s.Bound.Round(100*time.Millisecond), s.PodsPerSecond(), s.CreatedPerSecond(), s.CPUPerPod(), s.NodesUsed, s.MostOnANode)
}

// Run registers nodes and schedules pods at each step of cfg; scheduler
// is the scheduler's process (its CPU is read), progress hears each step.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface, scheduler int, progress func(string)) ([]Step, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	var steps []Step
	registered := 0
	for i, nodes := range cfg.Steps {
		progress(fmt.Sprintf("registering nodes %d to %d", registered+1, nodes))
		if err := leaseflood.RegisterNodes(ctx, client, registered, nodes, cfg.Workers); err != nil {
			return steps, err
		}
		registered = nodes
		s, err := schedule(ctx, cfg, client, scheduler, i)
		s.Nodes = nodes
		if err != nil {
			return steps, fmt.Errorf("%d nodes: %w", nodes, err)
		}
		progress(s.Line())
		steps = append(steps, s)
	}
	return steps, nil
}

// schedule creates cfg.Pods pods (named for step) and waits until all are
// bound, reading the scheduler's CPU around it.
func schedule(ctx context.Context, cfg Config, client kubernetes.Interface, scheduler, step int) (Step, error) {
	pods := client.CoreV1().Pods(Namespace)
	prefix := fmt.Sprintf("step%d-", step)
	before, err := proc.ReadUsage(scheduler)
	if err != nil {
		return Step{}, fmt.Errorf("the scheduler's CPU: %w", err)
	}
	start := time.Now()
	var created time.Duration
	createErr := make(chan error, 1)
	go func() {
		err := leaseflood.InParallel(cfg.Pods, cfg.Workers, func(k int) error {
			_, err := pods.Create(ctx, NewPod(fmt.Sprintf("%s%05d", prefix, k), cfg.PodCPU), metav1.CreateOptions{})
			return err
		})
		created = time.Since(start)
		createErr <- err
	}()
	b := &binds{prefix: prefix, seen: map[string]bool{}, onNode: map[string]int{}}
	err = b.wait(ctx, pods, cfg.Pods)
	if err := errors.Join(err, <-createErr); err != nil {
		return Step{}, err
	}
	after, err := proc.ReadUsage(scheduler)
	if err != nil {
		return Step{}, fmt.Errorf("the scheduler's CPU: %w", err)
	}
	used, most := b.placement()
	return Step{Pods: len(b.seen), Created: created, Bound: b.last.Sub(start), SchedulerCPU: after.Sub(before).CPU, NodesUsed: used, MostOnANode: most}, nil
}

// binds records the pods named prefix* seen bound, where, and when the
// last was.
type binds struct {
	prefix string
	seen   map[string]bool
	onNode map[string]int // pods per node
	last   time.Time
}

func (b *binds) see(pod *corev1.Pod) {
	if strings.HasPrefix(pod.Name, b.prefix) && pod.Spec.NodeName != "" && !b.seen[pod.Name] {
		b.seen[pod.Name], b.last = true, time.Now()
		b.onNode[pod.Spec.NodeName]++
	}
}

// placement is how many nodes got pods, and the most one got.
func (b *binds) placement() (nodes, most int) {
	for _, n := range b.onNode {
		most = max(most, n)
	}
	return len(b.onNode), most
}

// wait lists and watches the pods until want are bound, listing and
// watching again when a watch ends (a watch may be closed by the server
// at any time).
func (b *binds) wait(ctx context.Context, pods podsClient, want int) error {
	deadline := time.Now().Add(BindTimeout)
	for len(b.seen) < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods bound after %s", len(b.seen), want, BindTimeout)
		}
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			b.see(&list.Items[i])
		}
		if len(b.seen) >= want {
			return nil
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		err = b.follow(ctx, w, want, deadline)
		w.Stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// follow reads w until want pods are bound, w ends (nil: list again) or
// the deadline passes (nil too: wait says how many).
func (b *binds) follow(ctx context.Context, w watch.Interface, want int, deadline time.Time) error {
	timeout := time.After(time.Until(deadline))
	for len(b.seen) < want {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil
			}
			if pod, isPod := ev.Object.(*corev1.Pod); isPod {
				b.see(pod)
			}
		case <-timeout:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// podsClient is what binds reads of the pods.
type podsClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewPod is a pod the scheduler places anywhere: cpu millicores and 16Mi
// requested, and a toleration of every taint.
func NewPod(name string, cpu int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"k1m.dev/bench": "schedule"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewMilliQuantity(int64(cpu), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
}

// Result is the scenario's steps, each build's fresh server per round.
type Result struct {
	Config Config
	Steps  []Step
}

// CSVHeader and CSVRows are the steps as raw data (schedule.csv).
func (r *Result) CSVHeader() []string {
	return []string{"flavour", "round", "nodes", "pods", "bound_s", "pods_per_s", "created_per_s", "scheduler_cpu_us_per_pod", "nodes_used", "most_on_a_node"}
}

func (r *Result) CSVRows() [][]string {
	var rows [][]string
	for _, s := range r.Steps {
		rows = append(rows, []string{s.Flavour, fmt.Sprint(s.Round), fmt.Sprint(s.Nodes), fmt.Sprint(s.Pods), stats.CSVFloat(s.Bound.Seconds()),
			stats.CSVFloat(s.PodsPerSecond()), stats.CSVFloat(s.CreatedPerSecond()), stats.CSVFloat(s.CPUPerPod()), fmt.Sprint(s.NodesUsed), fmt.Sprint(s.MostOnANode)})
	}
	return rows
}

// Markdown is the summary's section: per node count, each build's median
// pods/s and CPU per pod, and the ratios k1m/stock.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Scheduler: %d pods requesting %dm CPU at each node count, created %d at a time (median of rounds)\n\n", r.Config.Pods, r.Config.PodCPU, r.Config.Workers)
	b.WriteString("Nodes registered as kubelets register them, with no kubelet behind them; pods that tolerate every taint. Pods/s: pods bound per second from the first create to the last bind; created/s: the pace of the creates (when close to pods/s, the creates were the limit).\n\n")
	b.WriteString("Nodes used, most on a node: how many nodes got the step's pods and the most one got (medians).\n\n")
	b.WriteString("| nodes | build | pods/s | created/s | scheduler CPU-µs per pod | nodes used | most on a node |\n|---:|---|---:|---:|---:|---:|---:|\n")
	nodes := map[int]bool{}
	var counts []int
	var flavours []string
	for _, s := range r.Steps {
		if !nodes[s.Nodes] {
			nodes[s.Nodes] = true
			counts = append(counts, s.Nodes)
		}
		if !slices.Contains(flavours, s.Flavour) {
			flavours = append(flavours, s.Flavour)
		}
	}
	// The builds first, stock before k1m; other variants as they came.
	slices.SortStableFunc(flavours, func(a, b string) int { return buildOrder(a) - buildOrder(b) })
	sort.Ints(counts)
	median := func(n int, flavour string, f func(Step) float64) float64 {
		var v []float64
		for _, s := range r.Steps {
			if s.Nodes == n && s.Flavour == flavour {
				v = append(v, f(s))
			}
		}
		return stats.Median(v)
	}
	for _, n := range counts {
		for _, flavour := range flavours {
			rate := median(n, flavour, Step.PodsPerSecond)
			if rate == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %.0f | %.0f | %.0f |\n", n, flavour, rate, median(n, flavour, Step.CreatedPerSecond), median(n, flavour, Step.CPUPerPod),
				median(n, flavour, func(s Step) float64 { return float64(s.NodesUsed) }), median(n, flavour, func(s Step) float64 { return float64(s.MostOnANode) }))
		}
	}
	b.WriteString("\n")
	for _, n := range counts {
		k, s := median(n, "k1m", Step.PodsPerSecond), median(n, "stock", Step.PodsPerSecond)
		if k > 0 && s > 0 {
			fmt.Fprintf(&b, "%d nodes, k1m / stock: pods/s x%.2f, CPU per pod x%.2f.\n", n, stats.Ratio(k, s),
				stats.Ratio(median(n, "k1m", Step.CPUPerPod), median(n, "stock", Step.CPUPerPod)))
		}
	}
	return b.String()
}

// buildOrder puts stock, then k1m, before any other variant.
func buildOrder(flavour string) int {
	switch flavour {
	case "stock":
		return 0
	case "k1m":
		return 1
	}
	return 2
}
