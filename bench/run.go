package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/controlplane"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/dnsload"
	"k1m.dev/k1m/bench/etcdflood"
	"k1m.dev/k1m/bench/joins"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/metricsload"
	"k1m.dev/k1m/bench/noderamp"
	"k1m.dev/k1m/bench/proxymode"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/bench/schedule"
	"k1m.dev/k1m/bench/storebytes"
	"k1m.dev/k1m/bench/watchcache"
	"k1m.dev/k1m/pkg/config"
)

// Scenario is one benchmark scenario: its name (--scenarios), whether
// make bench runs it unnamed, and what it runs, adding its rows to the
// report. A new scenario is one entry here, its run function, and its
// part of the Report.
type Scenario struct {
	Name string
	// Default scenarios run without bringing up a local cluster (about
	// 10 minutes in all); the others run only when named.
	Default bool
	Run     func(ctx context.Context, o Options, variants map[string]controlplane.Variant, rep *Report) error
}

// registry lists the scenarios in the order a run takes them.
var registry = []Scenario{
	{"lease", true, runLease},
	{"etcd", true, ignoringVariants(runEtcd)},
	{"nodes", true, runNodes},
	{"watchcache", true, ignoringVariants(runWatchCache)},
	{"scaleout", false, ignoringVariants(runScaleOut)},
	{"deployed", false, ignoringVariants(runDeployed)},
	{"joins", false, ignoringVariants(runJoins)},
	{"schedule", false, ignoringVariants(runSchedule)},
	{"cluster", false, ignoringVariants(runCluster)},
	{"proxy", false, ignoringVariants(runProxy)},
	{"dns", false, ignoringVariants(runDNS)},
	{"store", false, ignoringVariants(runStore)},
	{"metrics", false, ignoringVariants(runMetrics)},
}

// ignoringVariants adapts a scenario that starts its own control planes.
func ignoringVariants(run func(context.Context, Options, *Report) error) func(context.Context, Options, map[string]controlplane.Variant, *Report) error {
	return func(ctx context.Context, o Options, _ map[string]controlplane.Variant, rep *Report) error {
		return run(ctx, o, rep)
	}
}

// Scenarios are the scenario names, in the order a run takes them.
var Scenarios = scenarioNames(func(Scenario) bool { return true })

// DefaultScenarios are what make bench runs.
var DefaultScenarios = scenarioNames(func(s Scenario) bool { return s.Default })

func scenarioNames(keep func(Scenario) bool) []string {
	var names []string
	for _, s := range registry {
		if keep(s) {
			names = append(names, s.Name)
		}
	}
	return names
}

// scenarioNamed is the registry's scenario of that name.
func scenarioNamed(name string) (Scenario, error) {
	for _, s := range registry {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("--scenarios: unknown scenario %q, want some of %s", name, strings.Join(Scenarios, ","))
}

// Options of a run.
type Options struct {
	Results   string // results folder
	BuildOut  string // where make build / make build-stock put the binaries
	Self      string // this binary (etcd runs as `Self etcd`)
	Scenarios []string
	Rounds    int // alternating rounds of every variant
	// ServerArgs are more `k1m server` flags for every server a scenario
	// brings up with eachFresh (joins, schedule, cluster, proxy, dns),
	// e.g. --kube-scheduler-arg=profiling=true to profile it by hand.
	ServerArgs []string
	Ablation   bool // lease flood also on each single change over stock
	// CPUProfiles: CPU-profile kube-apiserver and etcd over each lease
	// flood's window and break the CPU down (CPU profiles in runs/, table
	// in summary).
	CPUProfiles bool

	Lease leaseflood.Config
	Etcd  etcdflood.Config
	Nodes noderamp.Config
	// LongRenew is the renew interval of the node ramp's long-lease
	// columns.
	LongRenew time.Duration

	WatchBenchtime string
	WatchCount     int

	// ScaleOut says where the k1m build, its images and the scale-out
	// clusters' data are.
	ScaleOut scaleout.Options
	// Deployed says where both builds' k1m are for the deployed scenario
	// (and the joins scenario).
	Deployed deployed.Options
	// Joins is the joins scenario's size.
	Joins joins.Config
	// Schedule is the schedule scenario's node counts and pods.
	Schedule schedule.Config
	// Cluster is the cluster scenario's node counts and load.
	Cluster clusterload.Config
	// Proxy is the proxy scenario's Service counts and churn.
	Proxy proxymode.Config
	// DNS is the dns scenario's query rates.
	DNS dnsload.Config
	// Store is the store scenario's cluster, workload and sizing.
	Store storebytes.Config
	// Metrics is the metrics scenario's node counts and pods.
	Metrics metricsload.Config

	// Benchplot is the plotting program k1m-build bench-tools builds.
	Benchplot string

	Progress io.Writer
}

// Run runs the chosen scenarios and writes the results folder.
func Run(ctx context.Context, o Options) error {
	variants, err := Variants(o.BuildOut)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Results, 0o755); err != nil {
		return err
	}
	rep := &Report{Dir: o.Results, Machine: DescribeMachine(o.Results), Started: time.Now().UTC()}
	for _, s := range o.Scenarios {
		start := time.Now()
		fmt.Fprintf(o.Progress, "== scenario %s\n", s)
		scenario, err := scenarioNamed(s)
		if err == nil {
			err = scenario.Run(ctx, o, variants, rep)
		}
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s, err)
		}
		fmt.Fprintf(o.Progress, "== scenario %s done in %v\n", s, time.Since(start).Round(time.Second))
		// Raw data so far is kept even if a later scenario fails or is stopped.
		rep.Finished = time.Now().UTC()
		if err := rep.writeData(); err != nil {
			return err
		}
	}
	return rep.Write(o.Benchplot, o.Progress)
}

// order alternates the variants: forward on even rounds, backward on odd
// ones, so drift over the run (heat, page cache) hits both sides alike.
func order(names []string, round int) []string {
	out := append([]string(nil), names...)
	if round%2 == 1 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func runLease(ctx context.Context, o Options, variants map[string]controlplane.Variant, rep *Report) error {
	names := []string{Stock, K1m}
	if o.Ablation {
		names = append(names, StockHashmap, StockGoTuning, StockNoFsync)
	}
	for round := 0; round < o.Rounds; round++ {
		for _, name := range order(names, round) {
			v := variants[name]
			fmt.Fprintf(o.Progress, "lease flood, round %d/%d, %s: %d Leases, %d workers, %d watchers, %v warm-up + %v\n",
				round+1, o.Rounds, name, o.Lease.Leases, o.Lease.Workers, o.Lease.Watchers, o.Lease.Warmup, o.Lease.Duration)
			dir := filepath.Join(o.Results, "runs", fmt.Sprintf("lease-%s-%d", name, round+1))
			cp, err := controlplane.Start(ctx, v, controlplane.Options{Dir: dir, Self: o.Self})
			if err != nil {
				return err
			}
			servers := leaseflood.Servers{APIServer: cp.APIServer, Etcd: cp.EtcdMembers()}
			var profiled []string
			if o.CPUProfiles {
				servers.CPUProfile = func(ctx context.Context, window time.Duration) (err error) {
					profiled, err = cp.CPUProfile(ctx, window, dir)
					return err
				}
			}
			res, err := leaseflood.Run(ctx, cp.Config, servers, o.Lease)
			cp.Discard()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			row := LeaseRow{Variant: name, Round: round + 1, Result: res}
			if row.Profiles, err = readCPUProfiles(dir, profiled); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			fmt.Fprintf(o.Progress, "  %s\n", row.Line())
			rep.Lease = append(rep.Lease, row)
		}
	}
	return nil
}

func runEtcd(ctx context.Context, o Options, rep *Report) error {
	modes := []string{"fsync", "no-fsync"}
	for round := 0; round < o.Rounds; round++ {
		for _, mode := range order(modes, round) {
			fmt.Fprintf(o.Progress, "etcd flood, round %d/%d, %s: %d keys, %d workers over %d clients, %v warm-up + %v\n",
				round+1, o.Rounds, mode, o.Etcd.Keys, o.Etcd.Workers, o.Etcd.Clients, o.Etcd.Warmup, o.Etcd.Duration)
			dir := filepath.Join(o.Results, "runs", fmt.Sprintf("etcd-%s-%d", mode, round+1))
			member, tls, err := controlplane.StartEtcd(ctx, controlplane.Options{Dir: dir, Self: o.Self}, nil, mode == "no-fsync")
			if err != nil {
				return err
			}
			res, err := etcdflood.Run(ctx, controlplane.EtcdURL(controlplane.DurableEtcdPort), etcdflood.TLS(tls), member, o.Etcd)
			member.Stop()
			controlplane.DropEtcdData(dir)
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			row := EtcdRow{Mode: mode, Round: round + 1, Result: res}
			fmt.Fprintf(o.Progress, "  %s\n", row.Line())
			rep.Etcd = append(rep.Etcd, row)
		}
	}
	return nil
}

// nodeColumns: stock and k1m at upstream's 10 s, then both at the long
// interval (the controller-manager's timings from config.LeaseProfileFor,
// as k1m server derives them; stock's kubelet reaches it through its
// lease duration, a quarter of which is its renew interval).
func nodeColumns(variants map[string]controlplane.Variant, long time.Duration) ([]nodeColumn, error) {
	var cols []nodeColumn
	for _, c := range []struct {
		base  string
		renew time.Duration
	}{
		{Stock, config.DefaultRenewInterval}, {K1m, config.DefaultRenewInterval}, {Stock, long}, {K1m, long},
	} {
		leaseProfile, err := config.LeaseProfileFor(c.renew)
		if err != nil {
			return nil, err
		}
		v := variants[c.base]
		v.Name = fmt.Sprintf("%s-%v", c.base, c.renew)
		v.ControllerArgs = append(append([]string{}, v.ControllerArgs...), "--node-monitor-grace-period="+leaseProfile.GracePeriod.String())
		if c.base == K1m { // patch 0003's flag; stock only has the grace period
			v.ControllerArgs = append(v.ControllerArgs, "--node-lease-duration="+leaseProfile.LeaseDuration.String())
		}
		cols = append(cols, nodeColumn{base: c.base, variant: v, leaseProfile: leaseProfile})
	}
	return cols, nil
}

// nodeColumn is one column of the node ramp: a variant with the lease
// profile (renew interval, lease duration, grace period) of its interval.
type nodeColumn struct {
	base         string
	variant      controlplane.Variant
	leaseProfile config.LeaseProfile
}

func runNodes(ctx context.Context, o Options, variants map[string]controlplane.Variant, rep *Report) error {
	cols, err := nodeColumns(variants, o.LongRenew)
	if err != nil {
		return err
	}
	for _, col := range cols {
		name := col.variant.Name
		dir := filepath.Join(o.Results, "runs", "nodes-"+name)
		cp, err := controlplane.Start(ctx, col.variant, controlplane.Options{Dir: dir, Self: o.Self, ControllerManager: true})
		if err != nil {
			return err
		}
		cfg := o.Nodes
		cfg.Self, cfg.CPUProfiles = o.Self, o.CPUProfiles
		cfg.Simulator.RenewInterval, cfg.Simulator.LeaseDuration = col.leaseProfile.RenewInterval, col.leaseProfile.LeaseDuration
		// Every node renews at least once inside a window, whatever its
		// interval.
		cfg.Hold = max(cfg.Hold, col.leaseProfile.RenewInterval)
		cfg.Progress, cfg.ProgressPrefix = o.Progress, fmt.Sprintf("nodes %s: ", name)
		res, err := noderamp.Run(ctx, cp, dir, cfg)
		cp.Discard()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out := NodeColumn{Name: name, Variant: col.base, Renew: col.leaseProfile.RenewInterval, SimulatorCores: cfg.SimulatorCores, Result: res}
		if out.ProfiledStep, out.Profiles, err = nodeCPUProfiles(dir, res); err != nil {
			return err
		}
		rep.Nodes = append(rep.Nodes, out)
		// A long ramp's finished columns are kept if a later one fails.
		if err := rep.writeData(); err != nil {
			return err
		}
	}
	return nil
}

func runWatchCache(ctx context.Context, o Options, rep *Report) error {
	log, err := os.Create(filepath.Join(o.Results, "watchcache-bench.txt"))
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(o.Progress, "watch cache stores: go test -bench %s, benchtime %s, count %d (output in %s)\n",
		watchcache.Benchmark, o.WatchBenchtime, o.WatchCount, log.Name())
	progress := lineProgress(o.Progress)
	res, err := watchcache.Run(ctx, o.BuildOut, o.WatchBenchtime, o.WatchCount, io.MultiWriter(log, progress))
	progress.Close()
	if err != nil {
		return err
	}
	rep.WatchCache = res
	return nil
}
