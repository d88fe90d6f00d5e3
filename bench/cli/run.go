package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench"
	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/dnsload"
	"k1m.dev/k1m/bench/etcdflood"
	"k1m.dev/k1m/bench/joins"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/metricsload"
	"k1m.dev/k1m/bench/noderamp"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proxymode"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/bench/schedule"
	"k1m.dev/k1m/bench/storebytes"
	"k1m.dev/k1m/pkg/config"
)

// BenchProfile is a set of defaults of a run (--profile); not the lease
// profile of a renew interval (config.LeaseProfile), nor a CPU profile.
type BenchProfile struct {
	Rounds         int
	Lease          leaseflood.Config
	Etcd           etcdflood.Config
	NodeSteps      []int
	NodeHold       time.Duration
	WatchBenchtime string
	WatchCount     int
}

// BenchProfiles: quick fits make bench's ~10 minutes on 2 cores; full
// repeats more and ramps the nodes further.
var BenchProfiles = map[string]BenchProfile{
	"quick": {
		Rounds:         1,
		Lease:          leaseflood.Config{Leases: 10000, Workers: 64, Watchers: 8, Warmup: 5 * time.Second, Duration: 20 * time.Second},
		Etcd:           etcdflood.Config{Keys: 10000, Clients: 8, Workers: 256, Warmup: 3 * time.Second, Duration: 15 * time.Second},
		NodeSteps:      []int{4000},
		NodeHold:       20 * time.Second,
		WatchBenchtime: "300ms",
		WatchCount:     1,
	},
	"full": {
		Rounds:         3,
		Lease:          leaseflood.Config{Leases: 10000, Workers: 64, Watchers: 8, Warmup: 10 * time.Second, Duration: 60 * time.Second},
		Etcd:           etcdflood.Config{Keys: 10000, Clients: 8, Workers: 256, Warmup: 5 * time.Second, Duration: 30 * time.Second},
		NodeSteps:      []int{4000, 8000, 12000, 16000, 20000, 25000, 30000, 40000, 50000, 60000, 80000, 100000},
		NodeHold:       30 * time.Second,
		WatchBenchtime: "1s",
		WatchCount:     5,
	},
}

// RunOptions are the flags of `k1m-bench run` as given. The numbers,
// durations and lists the bench profile sets are left at a value that
// means "the bench profile's": 0, empty, or -1 where 0 is a setting (--watchers,
// --warmup).
type RunOptions struct {
	BenchProfile   string // --profile: a key of BenchProfiles
	Results        string // empty: Default names a folder under BuildOut
	BuildOut       string // --out
	Scenarios      string // comma-separated
	Ablation       bool
	CPUProfiles    bool
	Rounds         int
	ServerArgs     []string // --server-arg, repeated
	Leases         int
	Workers        int
	Watchers       int
	Duration       time.Duration
	Warmup         time.Duration
	NodeSteps      string // comma-separated
	NodeHold       time.Duration
	LongRenew      time.Duration
	SimulatorCPU   float64
	WatchBenchtime string
	Benchplot      string
	// ScaleOut holds --k1m, --images-dir, --scaleout-data-root and
	// --scaleout-server-memory; Deployed holds --stock-k1m,
	// --deployed-nodes and --deployed-data-root (its K1M and ImagesDir
	// are ScaleOut's, copied by Default).
	ScaleOut scaleout.Options
	Deployed deployed.Options
	// Joins holds --joins and --joins-workers (the joins scenario runs
	// Deployed's two builds).
	Joins joins.Config
	// ScheduleNodes, Schedule hold --schedule-nodes (comma-separated),
	// --schedule-pods and --schedule-workers (Deployed's two builds too).
	ScheduleNodes  string
	ScheduleScores string // --schedule-scores, comma-separated
	Schedule       schedule.Config
	// ClusterNodes, Cluster hold --cluster-nodes (comma-separated),
	// --cluster-pods, --cluster-replicas, --cluster-pace and
	// --cluster-nodes-per-connection (Deployed's two builds too).
	ClusterNodes string
	ClusterSyncs string // --cluster-syncs, comma-separated
	// --cluster-route-events, comma-separated
	ClusterRouteEvents string
	// ClusterPartitions is --cluster-partitions, comma-separated.
	ClusterPartitions string
	Cluster           clusterload.Config
	// ProxyServices, Proxy hold --proxy-services (comma-separated),
	// --proxy-change-rate and --proxy-window (the stock build's k1m).
	ProxyServices string
	Proxy         proxymode.Config
	// DNSRates, DNS hold --dns-rates (comma-separated), --dns-window and
	// --dns-sockets (the k1m build's k1m).
	DNSRates string
	DNS      dnsload.Config
	// Store holds --store-agents, --store-pods-per-node,
	// --store-pods-per-deployment and --store-idle (the k1m build's k1m).
	Store storebytes.Config
	// MetricsNodes, Metrics hold --metrics-nodes (comma-separated),
	// --metrics-pods-per-node and --metrics-periods (the k1m build's k1m).
	MetricsNodes string
	Metrics      metricsload.Config
}

// DefaultRunOptions are the flags' defaults.
func DefaultRunOptions() RunOptions {
	return RunOptions{
		BenchProfile:  "quick",
		BuildOut:      "_output",
		Scenarios:     strings.Join(bench.DefaultScenarios, ","),
		Ablation:      true,
		CPUProfiles:   true,
		Watchers:      -1,
		Warmup:        -1,
		LongRenew:     40 * time.Second,
		SimulatorCPU:  0.6,
		ScaleOut:      scaleout.Options{DataRoot: scaleout.DefaultDataRoot, ServerMemory: scaleout.DefaultServerMemory},
		Deployed:      deployed.Options{Nodes: deployed.DefaultNodes, DataRoot: deployed.DefaultDataRoot},
		Joins:         joins.Config{Joins: joins.DefaultJoins, Workers: joins.DefaultWorkers},
		ScheduleNodes: "1000,5000",
		Schedule:      schedule.Config{Pods: schedule.DefaultPods, Workers: schedule.DefaultWorkers, PodCPU: schedule.DefaultPodCPU},
		ClusterNodes:  "500,1000,2000",
		Cluster: clusterload.Config{Pods: clusterload.DefaultPods, Replicas: clusterload.DefaultReplicas, Pace: clusterload.DefaultPace,
			NodesPerConnection: clusterload.DefaultNodesPerConnection},
		ProxyServices: "1000,10000",
		Proxy:         proxymode.Config{ChangeRate: proxymode.DefaultChangeRate, Window: proxymode.DefaultWindow},
		DNSRates:      counts(dnsload.DefaultRates),
		DNS:           dnsload.Config{Window: dnsload.DefaultWindow, Sockets: dnsload.DefaultSockets},
		Store: storebytes.Config{Agents: storebytes.DefaultAgents, PodsPerNode: storebytes.DefaultPodsPerNode, PodsPerDeployment: storebytes.DefaultPodsPerDeployment,
			Idle: storebytes.DefaultIdle, SizingPodsPerNode: storebytes.DefaultSizingPodsPerNode, SizingNodes: storebytes.DefaultSizingNodes},
		MetricsNodes: counts(metricsload.DefaultSteps),
		Metrics:      metricsload.Config{PodsPerNode: metricsload.DefaultPodsPerNode, Periods: metricsload.DefaultPeriods},
	}
}

// AddFlags binds o to fs; o's values are the flags' defaults.
func (o *RunOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BenchProfile, "profile", o.BenchProfile, "bench profile, the defaults: quick (make bench) or full (make bench-full)")
	fs.StringVar(&o.Results, "results", o.Results, "results folder (default _output/bench/<UTC time>-<bench profile>)")
	fs.StringVar(&o.BuildOut, "out", o.BuildOut, "where make build and make build-stock put the binaries")
	fs.StringVar(&o.Scenarios, "scenarios", o.Scenarios, "comma-separated, of "+strings.Join(bench.Scenarios, ",")+" (scaleout, deployed, joins and schedule, local clusters, only when named)")
	fs.BoolVar(&o.Ablation, "ablation", o.Ablation, "lease flood also on stock plus each k1m change alone")
	fs.BoolVar(&o.CPUProfiles, "cpu-profiles", o.CPUProfiles, "CPU-profile kube-apiserver and etcd over each lease flood's window (runs/*/*.cpu.pprof) and break the CPU down in the summary")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "alternating rounds per variant (bench profile's default)")
	fs.Func("server-arg", "joins, schedule, cluster, proxy, dns, store, metrics: one more `k1m server` flag for every server they bring up (repeatable), e.g. --server-arg=--kube-scheduler-arg=profiling=true", func(v string) error {
		if !strings.HasPrefix(v, "--") {
			return fmt.Errorf("want a `k1m server` flag starting with --, e.g. --kube-scheduler-arg=profiling=true")
		}
		o.ServerArgs = append(o.ServerArgs, v)
		return nil
	})
	fs.IntVar(&o.Leases, "leases", o.Leases, "Leases renewed in the lease flood (bench profile's default)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "lease flood renewers (bench profile's default)")
	fs.IntVar(&o.Watchers, "watchers", o.Watchers, "watches on the Leases (bench profile's default)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "measured window of each flood (bench profile's default)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "warm-up before each window (bench profile's default)")
	fs.StringVar(&o.NodeSteps, "node-steps", o.NodeSteps, "node counts of the node ramp, e.g. 2000,5000,10000 (bench profile's default)")
	fs.DurationVar(&o.NodeHold, "node-hold", o.NodeHold, "measured window at each node step, at least one renew interval (bench profile's default)")
	fs.DurationVar(&o.LongRenew, "long-renew", o.LongRenew, "renew interval of the node ramp's long-lease columns")
	fs.Float64Var(&o.SimulatorCPU, "simulator-cpu", o.SimulatorCPU, "the node simulator's CPU cap, in cores (its CPU is reported apart)")
	fs.StringVar(&o.WatchBenchtime, "watch-benchtime", o.WatchBenchtime, "go test -benchtime of the watch cache benchmarks (bench profile's default)")
	fs.StringVar(&o.Benchplot, "benchplot", o.Benchplot, "the plotting program (k1m-build bench-tools builds bench/cmd/benchplot)")
	fs.StringVar(&o.ScaleOut.K1M, "k1m", o.ScaleOut.K1M, "scaleout, deployed: the k1m binary (default OUT/bin/k1m, which make build writes)")
	fs.StringVar(&o.ScaleOut.ImagesDir, "images-dir", o.ScaleOut.ImagesDir, "scaleout, deployed: the image archives the nodes import (default OUT/images, which make images writes)")
	fs.StringVar(&o.Deployed.StockK1M, "stock-k1m", o.Deployed.StockK1M, "deployed: the stock build's k1m binary (default OUT/stock/bin/k1m, which make build-stock writes)")
	fs.IntVar(&o.Deployed.Nodes, "deployed-nodes", o.Deployed.Nodes, "deployed: Nodes the node status flood registers and updates")
	fs.StringVar(&o.Deployed.DataRoot, "deployed-data-root", o.Deployed.DataRoot, "deployed: the clusters' data, one directory each, emptied before each starts")
	fs.IntVar(&o.Joins.Joins, "joins", o.Joins.Joins, "joins: simulated nodes that join each build's fresh server with its join token")
	fs.IntVar(&o.Joins.Workers, "joins-workers", o.Joins.Workers, "joins: how many of them join at once")
	fs.StringVar(&o.ScheduleNodes, "schedule-nodes", o.ScheduleNodes, "schedule: the node counts, ascending, comma-separated")
	fs.IntVar(&o.Schedule.Pods, "schedule-pods", o.Schedule.Pods, "schedule: pods scheduled at each node count")
	fs.IntVar(&o.Schedule.Workers, "schedule-workers", o.Schedule.Workers, "schedule: pod creates in flight")
	fs.IntVar(&o.Schedule.PodCPU, "schedule-pod-cpu", o.Schedule.PodCPU, "schedule: each pod's CPU request in millicores (the nodes have 8,000)")
	fs.StringVar(&o.ScheduleScores, "schedule-scores", o.ScheduleScores, "schedule: instead of the two builds, the k1m build with kube-scheduler's percentageOfNodesToScore at each of these, comma-separated (0: upstream's adaptive default; e.g. 0,5,1)")
	fs.StringVar(&o.ClusterNodes, "cluster-nodes", o.ClusterNodes, "cluster: the simulated node counts, ascending, comma-separated")
	fs.IntVar(&o.Cluster.Pods, "cluster-pods", o.Cluster.Pods, "cluster: pods created at each node count (a multiple of --cluster-replicas)")
	fs.IntVar(&o.Cluster.Replicas, "cluster-replicas", o.Cluster.Replicas, "cluster: pods per Deployment (each with a Service)")
	fs.Float64Var(&o.Cluster.Pace, "cluster-pace", o.Cluster.Pace, "cluster: pods a second the Deployments are created at")
	fs.StringVar(&o.ProxyServices, "proxy-services", o.ProxyServices, "proxy: the Service counts, ascending, comma-separated")
	fs.Float64Var(&o.Proxy.ChangeRate, "proxy-change-rate", o.Proxy.ChangeRate, "proxy: EndpointSlice changes a second over each window")
	fs.DurationVar(&o.Proxy.Window, "proxy-window", o.Proxy.Window, "proxy: how long the changes go on at each Service count")
	fs.StringVar(&o.DNSRates, "dns-rates", o.DNSRates, "dns: the query rates a second offered to one CoreDNS replica, ascending, comma-separated")
	fs.DurationVar(&o.DNS.Window, "dns-window", o.DNS.Window, "dns: how long each rate is offered")
	fs.IntVar(&o.DNS.Sockets, "dns-sockets", o.DNS.Sockets, "dns: the client's UDP sockets")
	fs.IntVar(&o.Store.Agents, "store-agents", o.Store.Agents, "store: agents besides the server's own node")
	fs.IntVar(&o.Store.PodsPerNode, "store-pods-per-node", o.Store.PodsPerNode, "store: pause pods a node runs")
	fs.IntVar(&o.Store.PodsPerDeployment, "store-pods-per-deployment", o.Store.PodsPerDeployment, "store: pods per Deployment (each with a Service)")
	fs.DurationVar(&o.Store.Idle, "store-idle", o.Store.Idle, "store: how long the revisions written at rest are counted")
	fs.StringVar(&o.MetricsNodes, "metrics-nodes", o.MetricsNodes, "metrics: the simulated node counts, ascending, comma-separated")
	fs.IntVar(&o.Metrics.PodsPerNode, "metrics-pods-per-node", o.Metrics.PodsPerNode, "metrics: pods each simulated kubelet reports")
	fs.IntVar(&o.Metrics.Periods, "metrics-periods", o.Metrics.Periods, fmt.Sprintf("metrics: each node count's window, in metrics-server resolutions (%v)", metricsload.Resolution))
	fs.IntVar(&o.Cluster.NodesPerConnection, "cluster-nodes-per-connection", o.Cluster.NodesPerConnection, "cluster: simulated nodes whose watches share one connection")
	fs.BoolVar(&o.Cluster.Restart, "cluster-restart", o.Cluster.Restart, "cluster: after each node count, restart the server under its nodes and measure the reconnect storm")
	fs.IntVar(&o.Cluster.Servers, "cluster-servers", o.Cluster.Servers, "cluster: full servers in the cluster (1 to 5); above 1, the simulated nodes reach them through the k1m agent's load balancer, and --cluster-restart restarts them one at a time (a rolling restart)")
	fs.BoolVar(&o.Cluster.EagerRetry, "cluster-eager-retry", o.Cluster.EagerRetry, "cluster: the simulated nodes retry a failed list or watch after a jittered second, as runs before 2026-11-29 did, instead of client-go's reflector backoff (800 ms doubling to 30 s)")
	fs.BoolVar(&o.Cluster.WatchList, "cluster-watch-list", o.Cluster.WatchList, "cluster: the simulated nodes stream their lists (WatchList, KEP-3157: a watch with sendInitialEvents), as kubelet and kube-proxy do with the WatchListClient gate, instead of LIST")
	fs.Float64Var(&o.Cluster.JoinRate, "cluster-join-rate", o.Cluster.JoinRate, "cluster: register each step's nodes one at a time from one stream at this many a second (0: all at once from 50 streams)")
	fs.BoolVar(&o.Cluster.JoinProfile, "cluster-join-profile", o.Cluster.JoinProfile, fmt.Sprintf("cluster: CPU-profile each server's API server process over the first %v of each join burst (turns kube-apiserver's profiling on)", clusterload.JoinProfileWindow))
	fs.StringVar(&o.ClusterPartitions, "cluster-partitions", o.ClusterPartitions, "cluster: also run the k1m build with these store partitions (its --etcd-partitions, e.g. pods,nodes), as the variant "+clusterload.PartitionedVariant)
	fs.StringVar(&o.ClusterRouteEvents, "cluster-route-events", o.ClusterRouteEvents, "cluster: instead of the two builds, the k1m build with its route publisher at each of these budgets of route events a second (k1m server --pod-route-events-per-second), comma-separated (e.g. 2500,100000)")
	fs.StringVar(&o.ClusterSyncs, "cluster-syncs", o.ClusterSyncs, "cluster: instead of the two builds, the k1m build with its Deployment, ReplicaSet, Endpoints and EndpointSlice controllers at each of these worker counts, comma-separated (e.g. 5,20)")
	fs.StringVar(&o.ScaleOut.DataRoot, "scaleout-data-root", o.ScaleOut.DataRoot, "scaleout: the clusters' data, one directory each, emptied before each starts")
	fs.StringVar(&o.ScaleOut.ServerMemory, "scaleout-server-memory", o.ScaleOut.ServerMemory, "scaleout: every server's --memory-limit")
}

// ParseRun parses, defaults, checks and completes the flags of
// `k1m-bench run`.
func ParseRun(args []string) (bench.Options, error) {
	o, err := ParseRunFlags(args)
	if err != nil {
		return bench.Options{}, err
	}
	o.Default(time.Now())
	return o.Complete()
}

// ParseRunFlags parses args into the flags' defaults.
func ParseRunFlags(args []string) (RunOptions, error) {
	o := DefaultRunOptions()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse(args)
	return o, err
}

// Default fills the paths left empty: the binaries and images where make
// build, make build-stock and make images put them under --out, the
// deployed scenario's k1m and images from --k1m and --images-dir, and a
// results folder named after now and the bench profile.
func (o *RunOptions) Default(now time.Time) {
	if o.ScaleOut.K1M == "" {
		o.ScaleOut.K1M = filepath.Join(o.BuildOut, "bin", "k1m")
	}
	if o.ScaleOut.ImagesDir == "" {
		o.ScaleOut.ImagesDir = filepath.Join(o.BuildOut, "images")
	}
	o.Deployed.K1M, o.Deployed.ImagesDir = o.ScaleOut.K1M, o.ScaleOut.ImagesDir
	if o.Deployed.StockK1M == "" {
		o.Deployed.StockK1M = filepath.Join(o.BuildOut, "stock", "bin", "k1m")
	}
	if o.Results == "" {
		o.Results = filepath.Join(o.BuildOut, "bench", now.UTC().Format("20060102-150405")+"-"+o.BenchProfile)
	}
}

// Validate checks every flag and reports all problems at once, each
// naming its flag and the valid form. The numbers are checked as the run
// would use them: the bench profile's unless a flag overrides them.
func (o RunOptions) Validate() error {
	p, ok := BenchProfiles[o.BenchProfile]
	if !ok {
		return fmt.Errorf("--profile %q: want quick or full", o.BenchProfile)
	}
	errs := []error{
		requireOverride("--rounds", o.Rounds), requireOverride("--leases", o.Leases), requireOverride("--workers", o.Workers),
	}
	if o.NodeSteps != "" {
		_, err := parseSteps(o.NodeSteps)
		errs = append(errs, err)
	}
	_, err := parseScenarios(o.Scenarios)
	errs = append(errs, err, requireNumbers("--schedule-scores", o.ScheduleScores, "0,5,1"))
	c := o.resolve(p)
	if c.Rounds < 1 {
		errs = append(errs, fmt.Errorf("--rounds %d: want at least 1", c.Rounds))
	}
	if _, err := config.LeaseProfileFor(o.LongRenew); err != nil {
		errs = append(errs, fmt.Errorf("--long-renew %v: want whole seconds from 1s to %v, e.g. 40s", o.LongRenew, config.MaxRenewInterval))
	}
	if o.NodeHold < 0 {
		errs = append(errs, fmt.Errorf("--node-hold %v: want a window of at least one renew interval, e.g. 20s (0: the bench profile's)", o.NodeHold))
	}
	errs = append(errs, c.Lease.Validate(), c.Etcd.Validate(), checkTools(c), checkScaleOut(c), checkDeployed(c))
	if slices.Contains(c.Scenarios, "nodes") {
		errs = append(errs, c.Nodes.Validate())
	}
	return errors.Join(errs...)
}

// Complete validates o and resolves the run it asks for: the bench profile's
// settings with the flags' overrides, and this binary (etcd and the node
// simulator run as its subcommands). Run reads only this.
func (o RunOptions) Complete() (bench.Options, error) {
	if err := o.Validate(); err != nil {
		return bench.Options{}, err
	}
	c := o.resolve(BenchProfiles[o.BenchProfile])
	self, err := os.Executable()
	c.Self = self
	return c, err
}

// resolve is the run o asks for on bench profile p: p's settings, each
// overridden by its flag when that is given (a negative number is left
// out: Validate reports it), and the lists parsed (nil when they do not
// parse).
func (o RunOptions) resolve(p BenchProfile) bench.Options {
	c := bench.Options{Results: o.Results, BuildOut: o.BuildOut, Rounds: p.Rounds, ServerArgs: o.ServerArgs, Ablation: o.Ablation, CPUProfiles: o.CPUProfiles,
		Lease: p.Lease, Etcd: p.Etcd, Nodes: nodeRamp(p, o.SimulatorCPU), LongRenew: o.LongRenew,
		WatchBenchtime: p.WatchBenchtime, WatchCount: p.WatchCount, ScaleOut: o.ScaleOut, Deployed: o.Deployed, Joins: o.Joins, Schedule: o.Schedule, Cluster: o.Cluster, Proxy: o.Proxy, DNS: o.DNS, Store: o.Store, Metrics: o.Metrics,
		Benchplot: o.Benchplot, Progress: os.Stdout}
	override(&c.Rounds, o.Rounds)
	override(&c.Lease.Leases, o.Leases)
	override(&c.Lease.Workers, o.Workers)
	if o.Watchers >= 0 {
		c.Lease.Watchers = o.Watchers
	}
	if o.Duration > 0 {
		c.Lease.Duration, c.Etcd.Duration = o.Duration, o.Duration
	}
	if o.Warmup >= 0 {
		c.Lease.Warmup, c.Etcd.Warmup = o.Warmup, o.Warmup
	}
	if o.NodeHold > 0 {
		c.Nodes.Hold = o.NodeHold
	}
	if o.WatchBenchtime != "" {
		c.WatchBenchtime = o.WatchBenchtime
	}
	if o.NodeSteps != "" {
		c.Nodes.Steps, _ = parseSteps(o.NodeSteps)
	}
	c.Scenarios, _ = parseScenarios(o.Scenarios)
	c.Schedule.Steps = parseCounts(o.ScheduleNodes)
	if o.ScheduleScores != "" {
		c.Schedule.Scores = parseCounts(o.ScheduleScores)
	}
	c.Cluster.Steps = parseCounts(o.ClusterNodes)
	if o.ClusterSyncs != "" {
		c.Cluster.Syncs = parseCounts(o.ClusterSyncs)
	}
	if o.ClusterRouteEvents != "" {
		c.Cluster.RouteEvents = parseCounts(o.ClusterRouteEvents)
	}
	if o.ClusterPartitions != "" {
		c.Cluster.Partitions = strings.Split(o.ClusterPartitions, ",")
	}
	c.Proxy.Steps = parseCounts(o.ProxyServices)
	c.DNS.Rates = parseCounts(o.DNSRates)
	c.Metrics.Steps = parseCounts(o.MetricsNodes)
	return c
}

// nodeRamp is the node ramp of bench profile p; the renew interval and lease
// duration are each column's.
func nodeRamp(p BenchProfile, simulatorCPU float64) noderamp.Config {
	return noderamp.Config{Steps: p.NodeSteps, Hold: p.NodeHold, ReadyTimeout: 5 * time.Minute, SLO: time.Second, Registrars: 16,
		SimulatorCores: simulatorCPU, Simulator: nodesim.Defaults()}
}

// override sets dst from a flag whose zero value means "the bench profile's";
// a negative value is requireOverride's error and leaves dst.
func override(dst *int, v int) {
	if v > 0 {
		*dst = v
	}
}

// requireNumbers checks that a list flag, when given, is whole numbers
// separated by commas (their range is the scenario's Validate), so that
// a typo is not read as 0.
func requireNumbers(flag, list, example string) error {
	if list == "" {
		return nil
	}
	for _, f := range strings.Split(list, ",") {
		if _, err := strconv.Atoi(strings.TrimSpace(f)); err != nil {
			return fmt.Errorf("%s %q: want whole numbers separated by commas, e.g. %s", flag, list, example)
		}
	}
	return nil
}

// requireOverride checks a flag whose zero value means "the bench profile's".
func requireOverride(flag string, v int) error {
	if v < 0 {
		return fmt.Errorf("%s %d: want a positive number, or leave it out for the bench profile's default", flag, v)
	}
	return nil
}

// checkTools wants the plotting program before anything starts.
func checkTools(o bench.Options) error {
	if o.Benchplot == "" {
		return errors.New("--benchplot is empty: give the path k1m-build bench-tools built (make bench does)")
	}
	if _, err := os.Stat(o.Benchplot); err != nil {
		return fmt.Errorf("--benchplot %s: %v (k1m-build bench-tools builds it)", o.Benchplot, err)
	}
	return nil
}

// checkScaleOut checks the scaleout scenario's needs, when it is chosen,
// before anything starts: its paths, root (network namespaces, cgroups,
// containerd, as make cluster), and renewers for three API servers.
func checkScaleOut(o bench.Options) error {
	if !slices.Contains(o.Scenarios, "scaleout") {
		return nil
	}
	errs := []error{o.ScaleOut.Validate()}
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("--scenarios scaleout: needs root (it runs local clusters: network namespaces, cgroups, containerd)"))
	}
	if o.Lease.Workers < 3 {
		errs = append(errs, fmt.Errorf("--workers %d: scaleout spreads the renewers over up to 3 API servers: want at least 3", o.Lease.Workers))
	}
	return errors.Join(errs...)
}

// checkDeployed checks the needs of the deployed and joins scenarios
// when one is chosen: both binaries, the images, root (they run local
// clusters), and the joins' size.
func checkDeployed(o bench.Options) error {
	var errs []error
	for _, s := range []string{"deployed", "joins", "schedule", "cluster", "proxy", "dns", "store", "metrics"} {
		if !slices.Contains(o.Scenarios, s) {
			continue
		}
		if len(errs) == 0 {
			errs = append(errs, o.Deployed.Validate())
		}
		if os.Geteuid() != 0 {
			errs = append(errs, fmt.Errorf("--scenarios %s: needs root (it runs local clusters: network namespaces, cgroups, containerd)", s))
		}
	}
	if slices.Contains(o.Scenarios, "joins") {
		errs = append(errs, o.Joins.Validate())
	}
	if slices.Contains(o.Scenarios, "schedule") {
		errs = append(errs, o.Schedule.Validate())
	}
	if slices.Contains(o.Scenarios, "cluster") {
		errs = append(errs, o.Cluster.Validate())
	}
	if slices.Contains(o.Scenarios, "proxy") {
		errs = append(errs, o.Proxy.Validate())
	}
	if slices.Contains(o.Scenarios, "dns") {
		errs = append(errs, o.DNS.Validate())
	}
	if slices.Contains(o.Scenarios, "store") {
		errs = append(errs, o.Store.Validate())
	}
	if slices.Contains(o.Scenarios, "metrics") {
		errs = append(errs, o.Metrics.Validate())
	}
	return errors.Join(errs...)
}

func parseSteps(s string) ([]int, error) {
	var steps []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(steps) > 0 && n <= steps[len(steps)-1]) {
			return nil, fmt.Errorf("--node-steps %q: want ascending positive node counts, e.g. 2000,5000,10000", s)
		}
		steps = append(steps, n)
	}
	return steps, nil
}

// parseCounts reads comma-separated counts; one that is not a number
// reads as 0, which the scenario's Validate refuses naming its flag.
func parseCounts(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, _ := strconv.Atoi(strings.TrimSpace(f))
		out = append(out, n)
	}
	return out
}

func parseScenarios(s string) ([]string, error) {
	known := map[string]bool{}
	for _, k := range bench.Scenarios {
		known[k] = true
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !known[f] {
			return nil, fmt.Errorf("--scenarios: unknown scenario %q, want some of %s", f, strings.Join(bench.Scenarios, ","))
		}
		out = append(out, f)
	}
	return out, nil
}

// counts is the comma-separated form of a default list of counts, as its
// flag takes it.
func counts(ns []int) string {
	fields := make([]string, len(ns))
	for i, n := range ns {
		fields[i] = strconv.Itoa(n)
	}
	return strings.Join(fields, ",")
}
