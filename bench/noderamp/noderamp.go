// Package noderamp ramps the number of nodes whose heartbeats a control
// plane carries, simulated by nodesim in a CPU-capped cgroup of its own,
// until the mutating-call p99 breaks the upstream SLO (1 s), a node goes
// NotReady or the heartbeats are no longer delivered. At each step it
// reads what the control plane's processes spent (CPU, live heap) and
// what the simulator spent, apart, and CPU-profiles the control plane.
package noderamp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/controlplane"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/cgroups"
)

// MinDelivered is the share of the nominal Lease write rate (nodes / renew
// interval) a step must see to count as held.
const MinDelivered = 0.9

// SimulatorCgroup is the cgroup the simulator is capped in.
const SimulatorCgroup = "/k1m-bench/node-simulator"

// Config of one ramp.
type Config struct {
	Steps          []int         // node counts, ascending
	Hold           time.Duration // measured window at each step
	ReadyTimeout   time.Duration // for all nodes of a step to be Ready
	SLO            time.Duration // mutating-call p99 limit (upstream: 1 s)
	Registrars     int           // concurrent Node creators
	Simulator      nodesim.Config
	SimulatorCores float64 // the simulator's CPU cap
	Self           string  // the benchmark binary (runs `simulate-nodes`)
	CPUProfiles    bool    // profile the control plane over each step's window
	Progress       io.Writer
	ProgressPrefix string
}

// Validate checks c; errors name the k1m-bench run flag.
func (c Config) Validate() error {
	var errs []error
	if len(c.Steps) == 0 {
		errs = append(errs, errors.New("--node-steps is empty: want ascending node counts, e.g. 2000,5000,10000"))
	}
	for i, n := range c.Steps {
		if n < 1 || (i > 0 && n <= c.Steps[i-1]) {
			errs = append(errs, fmt.Errorf("--node-steps %v: want positive node counts in ascending order", c.Steps))
			break
		}
	}
	if c.SimulatorCores <= 0 {
		errs = append(errs, fmt.Errorf("--simulator-cpu %g: want the simulator's CPU cap in cores, more than 0, e.g. 0.5", c.SimulatorCores))
	}
	return errors.Join(append(errs, c.Simulator.Validate())...)
}

// Reading is what one window measured: the control plane's processes
// and the simulator, apart.
type Reading struct {
	Nodes           int
	Window          time.Duration
	MutatingP99     float64 // seconds
	LeaseWriteRate  float64 // Lease PUTs and POSTs per second
	StatusRate      float64 // nodes/status PATCHes per second
	NodePatchRate   float64 // PATCHes of Nodes themselves (the controller-manager's) per second
	NotReady        int
	APIServerCores  float64 // CPU over the window / wall time
	EtcdCores       float64 // every member
	ControllerCores float64
	APIServerHeap   int64 // live heap after a forced GC, bytes
	EtcdHeap        int64
	APIServerRSS    int64
	EtcdRSS         int64
	Simulator       SimulatorReading
	Profiles        []string // processes profiled into the step's directory
}

// ControlPlaneCores is the control plane's CPU over the window.
func (r Reading) ControlPlaneCores() float64 {
	return r.APIServerCores + r.EtcdCores + r.ControllerCores
}

// SimulatorReading is the simulator's side of a window.
type SimulatorReading struct {
	Cores           float64
	ThrottledShare  float64 // of its CFS periods, those that hit the cap
	Late            int64   // heartbeats started more than nodesim.LateAfter after due
	MaxLateness     time.Duration
	Errors          int64
	LastError       string
	Renewals        int64
	StatusReports   int64
	ExpectedRenewal float64 // nodes / renew interval
}

// Step is one node count's outcome.
type Step struct {
	Reading
	Held   bool
	Reason string // why not held
}

// Result of a ramp.
type Result struct {
	Idle    Reading // no nodes
	Steps   []Step
	MaxHeld int
	// Per node, from a least-squares line through the idle reading and
	// every step held (control-plane cores against nodes).
	CPUSecondsPer1000NodesMinute float64
	NodesPerCore                 float64
	// Marginal: the same line through the steps held only (at least
	// two), leaving out what the first nodes cost beyond their
	// heartbeats (caches filling, the controller-manager's loops).
	MarginalCPUSecondsPer1000NodesMinute float64
	MarginalNodesPerCore                 float64
	APIServerHeapPerNode                 float64 // bytes, idle to the largest step held
	EtcdHeapPerNode                      float64
}

// Run ramps cp through cfg.Steps, writing the simulator's log and the
// profiles under dir.
func Run(ctx context.Context, cp *controlplane.ControlPlane, dir string, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return Result{}, err
	}
	sim, err := nodesim.Start(ctx, cfg.Self, cp.Kubeconfig, cfg.Simulator, cfg.SimulatorCores, SimulatorCgroup, filepath.Join(dir, "node-simulator.log"))
	if err != nil {
		return Result{}, err
	}
	defer sim.Stop()
	r := ramp{cp: cp, client: client, sim: sim, cfg: cfg, dir: dir}
	var res Result
	fmt.Fprintf(cfg.Progress, "%sno nodes: idle reading\n", cfg.ProgressPrefix)
	if res.Idle, err = r.measure(ctx, 0, min(cfg.Hold, 10*time.Second)); err != nil {
		return res, err
	}
	created := 0
	for _, n := range cfg.Steps {
		step, err := r.step(ctx, created, n)
		created = n
		if err != nil {
			if ctx.Err() != nil {
				return res, err
			}
			// The server breaking under a step is what the ramp looks
			// for: record it as not held rather than lose the column.
			step = Step{Reading: Reading{Nodes: n, MutatingP99: math.NaN()}, Reason: err.Error()}
		}
		fmt.Fprintf(cfg.Progress, "%s%s\n", cfg.ProgressPrefix, step.Line())
		res.Steps = append(res.Steps, step)
		if !step.Held {
			break
		}
		res.MaxHeld = n
	}
	res.fit()
	return res, nil
}

// step adds Nodes created to n-1, lets them settle and measures a window.
func (r ramp) step(ctx context.Context, created, n int) (Step, error) {
	fmt.Fprintf(r.cfg.Progress, "%s%d nodes: registering\n", r.cfg.ProgressPrefix, n)
	if err := leaseflood.RegisterNodes(ctx, r.client, created, n, r.cfg.Registrars); err != nil {
		return Step{}, err
	}
	if _, err := r.sim.Add(n); err != nil {
		return Step{}, err
	}
	if err := r.settle(ctx, n); err != nil {
		return Step{}, err
	}
	reading, err := r.measure(ctx, n, r.cfg.Hold)
	if err != nil {
		return Step{}, err
	}
	step := Step{Reading: reading}
	judge(&step, r.cfg.SLO, r.cfg.Simulator.RenewInterval)
	return step, nil
}

type ramp struct {
	cp     *controlplane.ControlPlane
	client kubernetes.Interface
	sim    *nodesim.Process
	cfg    Config
	dir    string
}

// settle waits until every node is Ready, has its Lease (the first
// renewals, spread over one renew interval, are Creates) and the
// controller-manager has done with the new nodes (its node lifecycle
// controller PATCHes each new Node once, a GET and a PATCH at its
// client's rate), so that the window sees heartbeats only.
func (r ramp) settle(ctx context.Context, want int) error {
	deadline := time.Now().Add(r.cfg.ReadyTimeout + r.cfg.Simulator.RenewInterval)
	last := -1.0
	for {
		ready, _, err := countReady(ctx, r.client)
		var m apimetrics.Snapshot
		if err == nil {
			m, err = apimetrics.Scrape(ctx, r.client)
		}
		var sim nodesim.Stats
		if err == nil {
			sim, err = r.sim.Stats()
		}
		patches := m.RequestsTo("PATCH", "nodes", "")
		if err == nil && ready >= want && sim.WithoutLease == 0 && patches == last {
			return sleep(ctx, settleGrace)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %d of %d nodes Ready, %d without a Lease, Node PATCHes still coming (%.0f so far; %v)",
				r.cfg.ReadyTimeout+r.cfg.Simulator.RenewInterval, ready, want, sim.WithoutLease, patches, err)
		}
		last = patches
		if err := sleep(ctx, settlePoll); err != nil {
			return err
		}
	}
}

// settlePoll is how often settle looks (each look lists every Node), and
// settleGrace how long the window waits after: the garbage of the last
// List (hundreds of MB at tens of thousands of nodes) is not a heartbeat's.
const (
	settlePoll  = 5 * time.Second
	settleGrace = 5 * time.Second
)

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// counters are the cumulative readings a window subtracts.
type counters struct {
	metrics   apimetrics.Snapshot
	api, ctl  proc.Usage
	etcd      []proc.Usage
	sim       proc.Usage
	throttle  cgroups.Throttling
	simStats  nodesim.Stats
	startTime time.Time
}

func (r ramp) read(ctx context.Context) (counters, error) {
	var c counters
	var err error
	c.startTime = time.Now()
	if c.metrics, err = apimetrics.Scrape(ctx, r.client); err != nil {
		return c, err
	}
	if c.api, err = r.cp.APIServer.Usage(); err != nil {
		return c, err
	}
	if r.cp.Controller != nil {
		if c.ctl, err = r.cp.Controller.Usage(); err != nil {
			return c, err
		}
	}
	for _, m := range r.cp.EtcdMembers() {
		u, err := m.Usage()
		if err != nil {
			return c, err
		}
		c.etcd = append(c.etcd, u)
	}
	if c.sim, err = r.sim.Usage(); err != nil {
		return c, err
	}
	if c.throttle, err = r.sim.Throttling(); err != nil {
		return c, err
	}
	c.simStats, err = r.sim.Stats()
	return c, err
}

// measure holds a window of length window with nodes nodes.
func (r ramp) measure(ctx context.Context, nodes int, window time.Duration) (Reading, error) {
	before, err := r.read(ctx)
	if err != nil {
		return Reading{}, err
	}
	stepDir := filepath.Join(r.dir, "nodes-"+strconv.Itoa(nodes))
	var profiled []string
	if r.cfg.CPUProfiles { // the idle window too: the profiler's own cost is in every reading
		if profiled, err = profileWindow(ctx, r.cp, window, stepDir); err != nil {
			return Reading{}, err
		}
	} else if err := sleep(ctx, window); err != nil {
		return Reading{}, err
	}
	after, err := r.read(ctx)
	if err != nil {
		return Reading{}, err
	}
	reading := windowReading(before, after, nodes, r.cfg.Simulator.RenewInterval)
	reading.Profiles = profiled
	if reading.NotReady, err = notReady(ctx, r.client); err != nil {
		return reading, err
	}
	if reading.APIServerHeap, reading.EtcdHeap, err = r.cp.LiveHeap(ctx); err != nil {
		return reading, err
	}
	reading.APIServerRSS, reading.EtcdRSS = after.api.RSS, 0
	for _, u := range after.etcd {
		reading.EtcdRSS += u.RSS
	}
	return reading, nil
}

func profileWindow(ctx context.Context, cp *controlplane.ControlPlane, window time.Duration, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return cp.CPUProfile(ctx, window, dir)
}

// windowReading is what happened between two readings.
func windowReading(before, after counters, nodes int, renew time.Duration) Reading {
	elapsed := after.startTime.Sub(before.startTime)
	cores := func(a, b proc.Usage) float64 { return (a.CPU - b.CPU).Seconds() / elapsed.Seconds() }
	r := Reading{Nodes: nodes, Window: elapsed,
		MutatingP99:    stats.HistogramQuantile(0.99, stats.SubBuckets(after.metrics.MutatingLatency(""), before.metrics.MutatingLatency(""))),
		LeaseWriteRate: (after.metrics.Requests("PUT", "leases") + after.metrics.Requests("POST", "leases") - before.metrics.Requests("PUT", "leases") - before.metrics.Requests("POST", "leases")) / elapsed.Seconds(),
		StatusRate:     (after.metrics.RequestsTo("PATCH", "nodes", "status") - before.metrics.RequestsTo("PATCH", "nodes", "status")) / elapsed.Seconds(),
		NodePatchRate:  (after.metrics.RequestsTo("PATCH", "nodes", "") - before.metrics.RequestsTo("PATCH", "nodes", "")) / elapsed.Seconds(),
		APIServerCores: cores(after.api, before.api), ControllerCores: cores(after.ctl, before.ctl),
	}
	var etcd proc.Usage // every member's CPU, summed before dividing
	for i := range after.etcd {
		etcd.CPU += after.etcd[i].CPU - before.etcd[i].CPU
	}
	r.EtcdCores = cores(etcd, proc.Usage{})
	sim := after.simStats.Sub(before.simStats)
	throttle := after.throttle.Sub(before.throttle)
	r.Simulator = SimulatorReading{Cores: cores(after.sim, before.sim), Late: sim.Late, MaxLateness: after.simStats.MaxLateness,
		Errors: sim.Errors, Renewals: sim.Renewals, StatusReports: sim.StatusUpdates,
		ExpectedRenewal: float64(nodes) / renew.Seconds()}
	if sim.Errors > 0 {
		r.Simulator.LastError = sim.LastError
	}
	if throttle.Periods > 0 {
		r.Simulator.ThrottledShare = float64(throttle.ThrottledPeriods) / float64(throttle.Periods)
	}
	return r
}

// judge decides whether a measured step held: the SLO met, every node
// Ready, and the renewals delivered on time. When they were not, the
// reason says whether the simulator hit its cap (then the step measured
// the simulator, not the control plane).
func judge(step *Step, slo, renew time.Duration) {
	step.Held, step.Reason = false, ""
	want := float64(step.Nodes) / renew.Seconds()
	// Delivered: the renewals that succeeded (the server's request count
	// also counts failures and client-go's retries of 429s).
	delivered := float64(step.Simulator.Renewals) / step.Window.Seconds()
	switch {
	case math.IsNaN(step.MutatingP99):
		step.Reason = "no mutating calls measured"
	case step.MutatingP99 > slo.Seconds():
		step.Reason = fmt.Sprintf("mutating p99 %s > %v", apimetrics.FormatSeconds(step.MutatingP99), slo)
	case step.NotReady > 0:
		step.Reason = fmt.Sprintf("%d nodes NotReady", step.NotReady)
	case delivered < MinDelivered*want && step.Simulator.ThrottledShare > 0.5:
		step.Reason = fmt.Sprintf("renewals not delivered: %.0f of %.0f renewals/s, the simulator throttled in %.0f%% of periods (raise --simulator-cpu)",
			delivered, want, 100*step.Simulator.ThrottledShare)
	case delivered < MinDelivered*want:
		step.Reason = fmt.Sprintf("renewals not delivered: %.0f of %.0f renewals/s, the simulator not at its cap (the server is the limit)",
			delivered, want)
	default:
		step.Held = true
	}
}

// Line is the step's progress line.
func (s Step) Line() string {
	verdict := "held"
	if !s.Held {
		verdict = "not held (" + s.Reason + ")"
	}
	return fmt.Sprintf("%d nodes: mutating p99 %s, %.0f Lease writes/s, %.1f status/s, %d NotReady, control plane %.2f cores, live heap apiserver %d MiB etcd %d MiB, simulator %.2f cores (throttled %.0f%%, %d late): %s",
		s.Nodes, apimetrics.FormatSeconds(s.MutatingP99), s.LeaseWriteRate, s.StatusRate, s.NotReady, s.ControlPlaneCores(),
		s.APIServerHeap>>20, s.EtcdHeap>>20, s.Simulator.Cores, 100*s.Simulator.ThrottledShare, s.Simulator.Late, verdict)
}

// fit derives the per-node figures from the idle reading and the steps
// held.
func (res *Result) fit() {
	xs, ys := []float64{0}, []float64{res.Idle.ControlPlaneCores()}
	var largest *Step
	for i := range res.Steps {
		if s := &res.Steps[i]; s.Held {
			xs, ys = append(xs, float64(s.Nodes)), append(ys, s.ControlPlaneCores())
			largest = s
		}
	}
	res.CPUSecondsPer1000NodesMinute, res.NodesPerCore = math.NaN(), math.NaN()
	res.MarginalCPUSecondsPer1000NodesMinute, res.MarginalNodesPerCore = math.NaN(), math.NaN()
	res.APIServerHeapPerNode, res.EtcdHeapPerNode = math.NaN(), math.NaN()
	if largest == nil {
		return
	}
	slope := stats.Slope(xs, ys) // cores per node
	res.CPUSecondsPer1000NodesMinute = slope * 1000 * 60
	res.NodesPerCore = 1 / slope
	if marginal := stats.Slope(xs[1:], ys[1:]); !math.IsNaN(marginal) {
		res.MarginalCPUSecondsPer1000NodesMinute = marginal * 1000 * 60
		res.MarginalNodesPerCore = 1 / marginal
	}
	n := float64(largest.Nodes)
	res.APIServerHeapPerNode = float64(largest.APIServerHeap-res.Idle.APIServerHeap) / n
	res.EtcdHeapPerNode = float64(largest.EtcdHeap-res.Idle.EtcdHeap) / n
}

// notReady lists the nodes (from the watch cache) and counts those not
// Ready.
func notReady(ctx context.Context, client kubernetes.Interface) (int, error) {
	ready, total, err := countReady(ctx, client)
	return total - ready, err
}

func countReady(ctx context.Context, client kubernetes.Interface) (ready, total int, err error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for _, n := range nodes.Items {
		if isReady(&n) {
			ready++
		}
	}
	return ready, len(nodes.Items), nil
}

// isReady tells whether node's Ready condition is True.
func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// finite is v, or nil (JSON null) when v is NaN or infinite, which JSON
// cannot hold: a figure a ramp could not compute (one step held: no
// line between steps).
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// MarshalJSON writes the figures a ramp could not compute as null.
func (res Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		CPUSecondsPer1000NodesMinute, NodesPerCore, MarginalCPUSecondsPer1000NodesMinute, MarginalNodesPerCore *float64
		APIServerHeapPerNode, EtcdHeapPerNode                                                                  *float64
	}{plain(res), finite(res.CPUSecondsPer1000NodesMinute), finite(res.NodesPerCore),
		finite(res.MarginalCPUSecondsPer1000NodesMinute), finite(res.MarginalNodesPerCore),
		finite(res.APIServerHeapPerNode), finite(res.EtcdHeapPerNode)})
}

// MarshalJSON writes a p99 of no calls as null.
func (r Reading) MarshalJSON() ([]byte, error) {
	type plain Reading
	return json.Marshal(struct {
		plain
		MutatingP99 *float64
	}{plain(r), finite(r.MutatingP99)})
}

// MarshalJSON writes the step's reading and its verdict as one object
// (the embedded Reading's MarshalJSON would otherwise stand for the whole
// step).
func (s Step) MarshalJSON() ([]byte, error) {
	reading, err := json.Marshal(s.Reading)
	if err != nil {
		return nil, err
	}
	verdict, err := json.Marshal(struct {
		Held   bool
		Reason string
	}{s.Held, s.Reason})
	if err != nil {
		return nil, err
	}
	// Both are JSON objects: join their members.
	return append(append(reading[:len(reading)-1], ','), verdict[1:]...), nil
}
