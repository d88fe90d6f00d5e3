// Package clusterload measures the whole cluster at rising node counts,
// in the spirit of upstream's ClusterLoader2 density and load tests: the
// server's own controllers, scheduler, kube-proxy, CoreDNS and k1m agent
// run as deployed, and simulated nodes stand for the rest. Each simulated
// node renews its Lease and reports its status as a kubelet does
// (bench/nodesim), keeps open the watches a kubelet, kube-proxy and k1m
// agent keep (NodeWatches), and reports the pods bound to it Running as
// its kubelet would once their container started. Each step registers
// nodes up to its count, then creates Deployments, each with a Service,
// at a steady pace, waits until every pod runs and the endpoints follow,
// and reads over that window the upstream SLOs (mutating API call p99 at
// most 1 s, non-streaming list p99 within its scope's bound, pod startup
// p99 at most 5 s), the scheduler's throughput, the watch events and
// bytes kube-apiserver sent, and each server process's CPU and memory.
package clusterload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/cpuprofile"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/lograte"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/constants"
)

// Defaults of the scenario.
var DefaultSteps = []int{500, 1000, 2000}

const (
	// DefaultPods are created at each step: 100 Deployments of 10.
	DefaultPods     = 1000
	DefaultReplicas = 10
	// DefaultPace is the pods a second the Deployments are created at:
	// under the stock scheduler's 52 binds a second (docs/performance.md,
	// "The scheduler"), so that neither build is measured past it.
	DefaultPace = 20
	// DefaultNodesPerConnection simulated nodes share a connection.
	DefaultNodesPerConnection = 50
)

// Fixed timings.
const (
	// Settle is how long a step waits after its nodes' watches have
	// listed before its load's window opens (first Lease renewals, the
	// node controllers' first look at the new Nodes).
	Settle = 15 * time.Second
	// RunTimeout bounds the wait for a step's pods to run, EndpointsTimeout
	// the wait for their endpoints after that.
	RunTimeout       = 5 * time.Minute
	EndpointsTimeout = 2 * time.Minute
	// SyncTimeout bounds the wait for new nodes' watches to list.
	SyncTimeout = 10 * time.Minute
	// reportWorkers send the simulated kubelets' pod status reports.
	reportWorkers   = 32
	registerWorkers = 50
)

// The upstream SLOs a step is held to (kubernetes/community
// sig-scalability/slos).
const (
	MutatingSLO   = time.Second
	PodStartupSLO = 5 * time.Second
)

// ListSLO is the bound of a non-streaming read's p99 by its scope.
var ListSLO = map[string]time.Duration{"resource": time.Second, "namespace": 5 * time.Second, "cluster": 30 * time.Second}

// minCalls is how many calls of a kind a window needs before its p99
// counts against the SLO (upstream reads it over 5 minutes of traffic).
const minCalls = 50

// Config is the scenario's size.
type Config struct {
	Steps              []int   // node counts, ascending
	Pods               int     // pods created at each step
	Replicas           int     // pods per Deployment (each with a Service)
	Pace               float64 // pods a second the Deployments are created at
	NodesPerConnection int
	// Syncs, when set, replaces the two builds by the k1m build at each
	// of these controller worker counts (ControllerSyncArgs).
	Syncs []int `json:",omitempty"`
	// RouteEvents, when set, replaces the two builds by the k1m build with
	// the route publisher at each of these route event budgets
	// (RouteEventArgs).
	RouteEvents []int `json:",omitempty"`
	// JoinProfile CPU-profiles the process that serves the API (k1m: the
	// server's own, with its etcds; stock: kube-apiserver's) over the
	// first JoinProfileWindow of each join burst (JoinProfileArgs).
	JoinProfile bool `json:",omitempty"`
	// Restart, when set, restarts the server under each step's nodes
	// after the step and measures the reconnect storm (Storm).
	Restart bool `json:",omitempty"`
	// JoinRate, when set, registers each step's nodes one at a time from
	// one stream at this many a second, each starting its heartbeats and
	// watches once created, as a kubelet does; unset, they register at
	// once from registerWorkers streams (the join burst).
	JoinRate float64 `json:",omitempty"`
	// WatchList, when set, makes the simulated nodes stream their lists
	// (KEP-3157: a watch with sendInitialEvents, as client-go's reflector
	// does under the WatchListClient gate) instead of a LIST.
	WatchList bool `json:",omitempty"`
	// EagerRetry, when set, makes the simulated nodes retry a failed list
	// or watch after a jittered second, as the runs recorded before
	// 2026-11-29 did; unset, they wait client-go's reflector backoff, as
	// the informers of kubelet, kube-proxy and the k1m agent do
	// (retryPolicy).
	EagerRetry bool `json:",omitempty"`
	// Partitions, when set, adds a third variant: the k1m build with its
	// store partitioned (PartitionArgs), beside the two builds.
	Partitions []string `json:",omitempty"`
	// Servers, above 1, brings up that many full servers, puts the
	// simulated nodes behind the k1m agent's load balancer (balancers),
	// and with Restart restarts the servers one at a time, as a rolling
	// upgrade does (rollingRestart). The step's other figures are server
	// 1's, without the controller-manager's work queues (its metrics port
	// is on loopback in the servers' network namespaces). 0 is 1.
	Servers int `json:",omitempty"`
}

// MaxServers is the most Config.Servers this machine's bench runs.
const MaxServers = 5

// PartitionedVariant names the k1m build with Config.Partitions.
const PartitionedVariant = "k1m-partitioned"

// PartitionArgs are the `k1m server` flags of the partitioned variant.
func PartitionArgs(partitions []string) []string {
	return []string{"--etcd-partitions=" + strings.Join(partitions, ",")}
}

// JoinProfileWindow is how much of a join burst JoinProfile profiles: a
// burst of 1,000 nodes took about 26 s on the reference machine.
const JoinProfileWindow = 15 * time.Second

// JoinProfileArgs turn on kube-apiserver's profiling endpoint, which k1m
// server turns off, for JoinProfile.
var JoinProfileArgs = []string{"--kube-apiserver-arg=profiling=true"}

// ControllerSyncArgs are `k1m server` flags giving the controllers this
// load drives (Deployments, ReplicaSets, Endpoints, EndpointSlices) n
// workers each, where upstream gives 5.
func ControllerSyncArgs(n int) []string {
	var args []string
	for _, flag := range []string{"concurrent-deployment-syncs", "concurrent-replicaset-syncs", "concurrent-endpoint-syncs", "concurrent-service-endpoint-syncs"} {
		args = append(args, fmt.Sprintf("--kube-controller-manager-arg=%s=%d", flag, n))
	}
	return args
}

// RouteEventArgs are `k1m server` flags pacing the route publisher to n
// route events a second summed over the nodes.
func RouteEventArgs(n int) []string {
	return []string{fmt.Sprintf("--pod-route-events-per-second=%d", n)}
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	errs := []error{stats.CheckAscending("--cluster-nodes", "node counts", "500,1000,2000", c.Steps)}
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("--cluster-replicas %d: want at least 1, e.g. %d", c.Replicas, DefaultReplicas))
	}
	if c.Pods < 1 || (c.Replicas >= 1 && c.Pods%c.Replicas != 0) {
		errs = append(errs, fmt.Errorf("--cluster-pods %d: want a positive multiple of --cluster-replicas (%d), e.g. %d", c.Pods, c.Replicas, DefaultPods))
	}
	if c.Pace <= 0 {
		errs = append(errs, fmt.Errorf("--cluster-pace %v: want pods a second above 0, e.g. %d", c.Pace, DefaultPace))
	}
	if c.NodesPerConnection < 1 {
		errs = append(errs, fmt.Errorf("--cluster-nodes-per-connection %d: want at least 1, e.g. %d", c.NodesPerConnection, DefaultNodesPerConnection))
	}
	if c.Servers < 0 || c.Servers > MaxServers {
		errs = append(errs, fmt.Errorf("--cluster-servers %d: want 1 to %d servers, e.g. 3", c.Servers, MaxServers))
	}
	if c.JoinRate < 0 {
		errs = append(errs, fmt.Errorf("--cluster-join-rate %v: want nodes a second above 0, e.g. 25, or 0 for every node at once", c.JoinRate))
	}
	for _, name := range c.Partitions {
		if _, ok := constants.StorePartitionNamed(name); !ok {
			errs = append(errs, fmt.Errorf("--cluster-partitions: %q is not a resource k1m partitions: want some of %s, e.g. pods,nodes", name, strings.Join(constants.StorePartitionNames(), ", ")))
		}
	}
	errs = append(errs, stats.CheckEach("--cluster-syncs", c.Syncs, func(n int) bool { return n >= 1 },
		"want worker counts of at least 1, e.g. 5,20 (empty: the two builds at their defaults)"))
	errs = append(errs, stats.CheckEach("--cluster-route-events", c.RouteEvents, func(n int) bool { return n >= 1 },
		"want route event budgets of at least 1, e.g. 2500,100000 (empty: the two builds at their defaults)"))
	return errors.Join(errs...)
}

// Env is the cluster a run measures.
type Env struct {
	Config    *rest.Config // an admin client of the server's API server
	ServerPID int          // the root of the server's processes
	ServerLog string       // the server's log (its process tree's)
	// ProfileDir is where Config.JoinProfile's profiles go.
	ProfileDir string
	Progress   func(string)
	// Restart restarts the server (Config.Restart).
	Restart Restarter
	// Servers are every server of a cluster of several (Config.Servers),
	// server 1 first; nil for one.
	Servers []Server
	// BalancerLog is where the simulated nodes' balancers report (with
	// Servers).
	BalancerLog string
}

// Server is one server of a cluster of several.
type Server struct {
	Config  *rest.Config // an admin client of its own API server
	PID     int          // the root of its processes
	Restart Restarter    // restarts it and returns its new PID
}

// Run measures every step of cfg on env's cluster, returning the steps
// measured so far when one fails.
func Run(ctx context.Context, cfg Config, env Env) ([]Step, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	via := direct(env.Config)
	var bal *balancers
	if len(env.Servers) > 1 {
		if bal, err = newBalancers(ctx, env.Servers, env.BalancerLog); err != nil {
			return nil, err
		}
		defer bal.close()
		via = bal.config
	}
	heartbeats, err := via("heartbeats")
	if err != nil {
		return nil, err
	}
	sim, err := nodesim.New(heartbeats, nodesim.Defaults())
	if err != nil {
		return nil, err
	}
	go sim.Run(ctx)
	nodes, err := newFleet(ctx, via, cfg.NodesPerConnection, reportWorkers, cfg.WatchList, cfg.EagerRetry)
	if err != nil {
		return nil, err
	}
	// The measuring watch counts apart from the nodes' watches.
	pods, measuring := newTracker(), &counts{}
	go measuring.follow(ctx, benchPods(client), pods.see)
	if err := measuring.waitSynced(ctx, 1, SyncTimeout); err != nil {
		return nil, err
	}
	var steps []Step
	registered := 0
	for k, n := range cfg.Steps {
		r := stepRun{k: k, from: registered, to: n, sim: sim, nodes: nodes, pods: pods, inNamespaces: bal != nil}
		s, err := step(ctx, cfg, env, client, r)
		registered = n
		if err != nil {
			return steps, fmt.Errorf("%d nodes: %w", n, err)
		}
		r.from = registered // the restart's nodes are all the step's
		switch {
		case !cfg.Restart || len(s.Unfinished) > 0:
		case bal != nil:
			s.Rolling = rollingRestart(ctx, &env, bal, r)
		default:
			env.Progress(fmt.Sprintf("%d nodes: restarting the server under them", n))
			s.Storm = restartUnderLoad(ctx, &env, client, r)
		}
		env.Progress(s.Line())
		steps = append(steps, s)
		if len(s.Unfinished) > 0 {
			env.Progress(fmt.Sprintf("%d nodes: the step did not finish; no larger step", n))
			break
		}
	}
	return steps, nil
}

// readRouted waits, after the join burst, until the route publisher has
// written every Node's route, and reads the time and CPU from the burst's
// start until then (none with --pod-routes=provider).
func (s *Step) readRouted(ctx context.Context, client kubernetes.Interface, env Env, r stepRun, joinStart reading) error {
	published, err := waitRouted(ctx, client, env.Progress)
	if err != nil || !published {
		return err
	}
	routed, err := read(ctx, client, env.Config, env.ServerPID, r)
	if err != nil {
		return err
	}
	s.Routed = routed.at.Sub(joinStart.at)
	s.RouteProcesses = components(joinStart, routed)
	s.RouteLateHeartbeats = routed.heartbeat.Sub(joinStart.heartbeat).Late
	return nil
}

// benchPods is the measuring watch: every pod the scenario's Deployments
// make, in every step's namespace.
func benchPods(client kubernetes.Interface) listWatch {
	p := client.CoreV1().Pods("")
	return tweaked(withLabels(benchLabel+"="+benchValue),
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return p.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return p.Watch(ctx, o) })
}

type stepRun struct {
	k, from, to int
	sim         *nodesim.Simulator
	nodes       *fleet
	pods        *tracker
	// inNamespaces: the servers run in network namespaces of their own
	// (Config.Servers above 1), where the controller-manager's metrics
	// port, on loopback, is out of the benchmark's reach.
	inNamespaces bool
}

// step brings the cluster to r.to nodes, then loads and reads it.
func step(ctx context.Context, cfg Config, env Env, client kubernetes.Interface, r stepRun) (Step, error) {
	s := Step{Nodes: r.to, Watches: r.to * len(NodeWatches)}
	ns := StepNamespace(r.k)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return s, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	// The join burst (the new nodes registering and listing everything
	// they watch, all at once, as after a restart of every node) is read
	// apart from the load's window, which the SLOs are held to.
	joinStart, err := read(ctx, client, env.Config, env.ServerPID, r)
	if err != nil {
		return s, err
	}
	var profile <-chan JoinProfile
	if cfg.JoinProfile {
		profile = profileJoin(ctx, env.Config, filepath.Join(env.ProfileDir, fmt.Sprintf("join-%d.cpu.pprof", r.to)))
	}
	env.Progress(fmt.Sprintf("%d nodes: registering %d to %d (%s), their heartbeats and %d watches each", r.to, r.from+1, r.to, joinShape(cfg.JoinRate), len(NodeWatches)))
	if err := r.join(ctx, client, cfg.JoinRate); err != nil {
		return s, err
	}
	if err := r.nodes.waitSynced(ctx, int64(s.Watches), SyncTimeout); err != nil {
		return s, err
	}
	joined, err := read(ctx, client, env.Config, env.ServerPID, r)
	if err != nil {
		return s, err
	}
	s.Joined = joined.at.Sub(joinStart.at)
	s.JoinedNodes = r.to - r.from
	s.JoinProcesses = components(joinStart, joined)
	if profile != nil {
		p := <-profile
		s.JoinProfile = &p
	}
	if err := s.readRouted(ctx, client, env, r, joinStart); err != nil {
		return s, err
	}
	if err := clock.Sleep(ctx, Settle); err != nil {
		return s, err
	}
	if s.IdleLog, err = idleLog(ctx, env.ServerLog); err != nil {
		return s, err
	}
	before, err := read(ctx, client, env.Config, env.ServerPID, r)
	if err != nil {
		return s, err
	}
	s.JoinMutating = worstMutating(joinStart, before)
	env.Progress(fmt.Sprintf("%d nodes: creating %d Deployments of %d with a Service each, %v pods a second", r.to, cfg.Pods/cfg.Replicas, cfg.Replicas, cfg.Pace))
	createStart := time.Now()
	err = createAtPace(ctx, client, ns, cfg.Pods/cfg.Replicas, cfg.Replicas, cfg.Pace)
	s.Created = time.Since(createStart)
	// A step whose creates fail (the API server too slow to answer in
	// the client's 30 s), or whose pods or endpoints do not get there in
	// time, is measured all the same, and not held: the ramp stops after
	// it.
	var unfinished []string
	if err != nil {
		unfinished = append(unfinished, firstLine(err))
	}
	var run startup
	if err == nil {
		run, err = r.pods.waitRunning(ctx, ns, cfg.Pods, RunTimeout)
		if err != nil {
			unfinished = append(unfinished, err.Error())
		}
	}
	endpoints := time.Now()
	if err == nil {
		endpoints, err = waitEndpoints(ctx, client, ns, cfg.Pods, EndpointsTimeout)
		if err != nil {
			unfinished = append(unfinished, err.Error())
		}
	}
	if ctx.Err() != nil {
		return s, ctx.Err()
	}
	after, err := read(ctx, client, env.Config, env.ServerPID, r)
	if err != nil {
		return s, err
	}
	s.fill(run, endpoints, before, after)
	if s.NotReady, err = notReady(ctx, client); err != nil {
		return s, err
	}
	s.judge(unfinished)
	if len(unfinished) == 0 {
		env.Progress(fmt.Sprintf("%d nodes: NetworkPolicy probe", r.to))
		s.Netpol = probeNetpol(ctx, client, ns, r.nodes, r.to, cfg.Pods/cfg.Replicas, cfg.Replicas)
	}
	return s, nil
}

// joinShape says how a step's nodes register.
func joinShape(rate float64) string {
	if rate <= 0 {
		return fmt.Sprintf("at once, %d streams", registerWorkers)
	}
	return fmt.Sprintf("%v a second, one stream", rate)
}

// join registers nodes r.from to r.to-1 and starts their heartbeats and
// watches: at once from registerWorkers streams, or with rate one node
// at a time from one stream at that pace, each node's heartbeats and
// watches starting once it is created. A create slower than the pace
// delays the next: the step's join window shows the rate reached.
func (r stepRun) join(ctx context.Context, client kubernetes.Interface, rate float64) error {
	if rate <= 0 {
		if err := leaseflood.RegisterNodes(ctx, client, r.from, r.to, registerWorkers); err != nil {
			return err
		}
		r.sim.Add(r.to)
		return r.nodes.add(ctx, r.from, r.to)
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := r.from; i < r.to; i++ {
		if i > r.from {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		if err := leaseflood.RegisterNodes(ctx, client, i, i+1, 1); err != nil {
			return err
		}
		r.sim.Add(i + 1)
		if err := r.nodes.add(ctx, i, i+1); err != nil {
			return err
		}
	}
	return nil
}

// IdleLogWindow is how long a step counts the server's log lines with its
// nodes heartbeating and nothing else going on, after Settle.
const IdleLogWindow = 30 * time.Second

// idleLogTop is how many of the busiest log sources a step keeps.
const idleLogTop = 8

// idleLog counts the lines the server logs over IdleLogWindow.
func idleLog(ctx context.Context, path string) (lograte.Window, error) {
	offset, err := lograte.Offset(path)
	if err != nil {
		return lograte.Window{}, err
	}
	start := time.Now()
	if err := clock.Sleep(ctx, IdleLogWindow); err != nil {
		return lograte.Window{}, err
	}
	return lograte.Since(path, offset, time.Since(start), idleLogTop)
}

// firstLine is the first of err's lines and how many more there are.
func firstLine(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%s (and %d more)", lines[0], len(lines)-1)
}

// notReady counts the simulated nodes not Ready (late heartbeats: the
// node lifecycle controller then marks their pods not ready).
func notReady(ctx context.Context, client kubernetes.Interface) (int, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: simulatedNodeLabel + "=" + simulatedNodeValue, ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("listing the simulated nodes: %w", err)
	}
	n := 0
	for _, node := range list.Items {
		ready := false
		for _, c := range node.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			n++
		}
	}
	return n, nil
}

// waitSynced waits until want watches have listed once.
func (f *counts) waitSynced(ctx context.Context, want int64, timeout time.Duration) error {
	return waitListed(ctx, f.synced.Load, want, timeout)
}

// waitSynced waits until want of the nodes' watches have listed once.
func (f *fleet) waitSynced(ctx context.Context, want int64, timeout time.Duration) error {
	return waitListed(ctx, f.totalSynced, want, timeout)
}

func waitListed(ctx context.Context, synced func() int64, want int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for synced() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d watches listed after %v", synced(), want, timeout)
		}
		if err := clock.Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// reading is the state of the cluster at one edge of a step's window.
type reading struct {
	at          time.Time
	metrics     apimetrics.Snapshot
	controllers apimetrics.Snapshot // kube-controller-manager's
	members     []proc.Member
	usage       map[int]proc.Usage
	self        proc.Usage
	heartbeat   nodesim.Stats
	events      int64 // events the simulated nodes received
	relists     int64
	reports     int64 // pod status reports that failed
}

func read(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, serverPID int, r stepRun) (reading, error) {
	members, err := proc.Tree(serverPID)
	if err != nil {
		return reading{}, fmt.Errorf("the server's processes: %w", err)
	}
	m, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return reading{}, err
	}
	var controllers apimetrics.Snapshot
	if !r.inNamespaces {
		if controllers, err = apimetrics.ScrapeComponent(ctx, cfg, controllerManagerAddress); err != nil {
			return reading{}, err
		}
	}
	self, err := proc.ReadUsage(os.Getpid())
	if err != nil {
		return reading{}, err
	}
	return reading{at: time.Now(), metrics: m, controllers: controllers, members: members, usage: deployed.ReadAll(members), self: self,
		heartbeat: r.sim.Stats(), events: r.nodes.totalEvents(), relists: r.nodes.totalRelists(), reports: r.nodes.reportErrors.Load()}, nil
}

// JoinProfile is a CPU profile of the process that serves the API over
// the start of a join burst, broken down by cost.
type JoinProfile struct {
	Path   string
	Total  time.Duration // sampled CPU
	Shares []cpuprofile.Share
	Error  string `json:",omitempty"`
}

// profileJoin captures a JoinProfileWindow CPU profile through the API
// server's /debug/pprof/profile into path, in the background.
func profileJoin(ctx context.Context, cfg *rest.Config, path string) <-chan JoinProfile {
	out := make(chan JoinProfile, 1)
	go func() {
		p := JoinProfile{Path: path}
		client, err := rest.HTTPClientFor(cfg)
		if err == nil {
			err = cpuprofile.Capture(ctx, client, cfg.Host+"/debug/pprof/profile", JoinProfileWindow, path)
		}
		if err == nil {
			p.Shares, p.Total, err = cpuprofile.Breakdown(path)
		}
		if err != nil {
			p.Error = err.Error()
		}
		out <- p
	}()
	return out
}
