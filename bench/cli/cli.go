// Package cli parses k1m-bench's command line: profiles of defaults
// (quick for make bench, full for make bench-full) that single flags
// override, checked before anything starts.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"k1m.dev/k1m/bench"
	"k1m.dev/k1m/bench/controlplane"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/etcdflood"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/noderamp"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/etcd"
)

// Profile is a set of defaults.
type Profile struct {
	Rounds         int
	Lease          leaseflood.Config
	Etcd           etcdflood.Config
	NodeSteps      []int
	NodeHold       time.Duration
	WatchBenchtime string
	WatchCount     int
}

// Profiles: quick fits make bench's ~10 minutes on 2 cores; full repeats
// more and ramps the nodes further.
var Profiles = map[string]Profile{
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

// Main runs a subcommand.
func Main(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: run (the benchmarks), etcd or simulate-nodes (internal: one etcd member, the node ramp's kubelets)")
	}
	// client-go logs every request cut short when a flood stops; the
	// benchmark's own progress is what the user reads.
	klog.SetLogger(logr.Discard())
	switch args[0] {
	case "run":
		o, err := ParseRun(args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the flag package printed the usage
		}
		if err != nil {
			return err
		}
		return bench.Run(ctx, o)
	case "etcd":
		return runEtcd(ctx, args[1:])
	case "simulate-nodes":
		return runNodeSimulator(ctx, args[1:])
	}
	return fmt.Errorf("unknown subcommand %q: want run, etcd or simulate-nodes", args[0])
}

// ParseRun parses and checks the flags of `k1m-bench run`.
func ParseRun(args []string) (bench.Options, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	profile := fs.String("profile", "quick", "defaults: quick (make bench) or full (make bench-full)")
	results := fs.String("results", "", "results folder (default _output/bench/<UTC time>-<profile>)")
	buildOut := fs.String("out", "_output", "where make build and make build-stock put the binaries")
	scenarios := fs.String("scenarios", strings.Join(bench.DefaultScenarios, ","), "comma-separated, of "+strings.Join(bench.Scenarios, ",")+" (scaleout and deployed, local clusters, only when named)")
	ablation := fs.Bool("ablation", true, "lease flood also on stock plus each k1m change alone")
	cpuProfiles := fs.Bool("cpu-profiles", true, "CPU-profile kube-apiserver and etcd over each lease flood's window (runs/*/*.cpu.pprof) and break the CPU down in the summary")
	rounds := fs.Int("rounds", 0, "alternating rounds per variant (profile default)")
	leases := fs.Int("leases", 0, "Leases renewed in the lease flood (profile default)")
	workers := fs.Int("workers", 0, "lease flood renewers (profile default)")
	watchers := fs.Int("watchers", -1, "watches on the Leases (profile default)")
	duration := fs.Duration("duration", 0, "measured window of each flood (profile default)")
	warmup := fs.Duration("warmup", -1, "warm-up before each window (profile default)")
	nodeSteps := fs.String("node-steps", "", "node counts of the node ramp, e.g. 2000,5000,10000 (profile default)")
	nodeHold := fs.Duration("node-hold", 0, "measured window at each node step, at least one renew interval (profile default)")
	longRenew := fs.Duration("long-renew", 40*time.Second, "renew interval of the node ramp's long-lease columns")
	simulatorCPU := fs.Float64("simulator-cpu", 0.6, "the node simulator's CPU cap, in cores (its CPU is reported apart)")
	watchBenchtime := fs.String("watch-benchtime", "", "go test -benchtime of the watch cache benchmarks (profile default)")
	var tools bench.Options
	fs.StringVar(&tools.Benchplot, "benchplot", "", "the plotting program (k1m-build bench-tools builds bench/cmd/benchplot)")
	var so scaleout.Options
	fs.StringVar(&so.K1M, "k1m", "", "scaleout, deployed: the k1m binary (default OUT/bin/k1m, which make build writes)")
	fs.StringVar(&so.ImagesDir, "images-dir", "", "scaleout, deployed: the image archives the nodes import (default OUT/images, which make images writes)")
	var dep deployed.Options
	fs.StringVar(&dep.StockK1M, "stock-k1m", "", "deployed: the stock build's k1m binary (default OUT/stock/bin/k1m, which make build-stock writes)")
	fs.IntVar(&dep.Nodes, "deployed-nodes", deployed.DefaultNodes, "deployed: Nodes the node status flood registers and updates")
	fs.StringVar(&dep.DataRoot, "deployed-data-root", deployed.DefaultDataRoot, "deployed: the clusters' data, one directory each, emptied before each starts")
	fs.StringVar(&so.DataRoot, "scaleout-data-root", scaleout.DefaultDataRoot, "scaleout: the clusters' data, one directory each, emptied before each starts")
	fs.StringVar(&so.ServerMemory, "scaleout-server-memory", scaleout.DefaultServerMemory, "scaleout: every server's --memory-limit")
	if err := fs.Parse(args); err != nil {
		return bench.Options{}, err
	}
	p, ok := Profiles[*profile]
	if !ok {
		return bench.Options{}, fmt.Errorf("--profile %q: want quick or full", *profile)
	}
	o := bench.Options{BuildOut: *buildOut, Rounds: p.Rounds, Ablation: *ablation, CPUProfiles: *cpuProfiles, Lease: p.Lease, Etcd: p.Etcd,
		Nodes:     nodeRamp(p, *simulatorCPU),
		LongRenew: *longRenew, WatchBenchtime: p.WatchBenchtime, WatchCount: p.WatchCount, Progress: os.Stdout,
		Benchplot: tools.Benchplot, ScaleOut: scaleOutOptions(so, *buildOut)}
	o.Deployed = deployedOptions(dep, o.ScaleOut, *buildOut)
	var errs []error
	errs = append(errs, override("--rounds", &o.Rounds, *rounds), override("--leases", &o.Lease.Leases, *leases),
		override("--workers", &o.Lease.Workers, *workers))
	if *watchers >= 0 {
		o.Lease.Watchers = *watchers
	}
	if *duration > 0 {
		o.Lease.Duration, o.Etcd.Duration = *duration, *duration
	}
	if *warmup >= 0 {
		o.Lease.Warmup, o.Etcd.Warmup = *warmup, *warmup
	}
	if *nodeHold > 0 {
		o.Nodes.Hold = *nodeHold
	}
	if *watchBenchtime != "" {
		o.WatchBenchtime = *watchBenchtime
	}
	if *nodeSteps != "" {
		steps, err := parseSteps(*nodeSteps)
		errs = append(errs, err)
		o.Nodes.Steps = steps
	}
	var err error
	o.Scenarios, err = parseScenarios(*scenarios)
	errs = append(errs, err)
	if o.Rounds < 1 {
		errs = append(errs, fmt.Errorf("--rounds %d: want at least 1", o.Rounds))
	}
	if _, err := config.LeaseProfileFor(*longRenew); err != nil {
		errs = append(errs, fmt.Errorf("--long-renew %v: want whole seconds from 1s to %v, e.g. 40s", *longRenew, config.MaxRenewInterval))
	}
	if *nodeHold < 0 {
		errs = append(errs, fmt.Errorf("--node-hold %v: want a window of at least one renew interval, e.g. 20s (0: the profile's)", *nodeHold))
	}
	errs = append(errs, o.Lease.Validate(), o.Etcd.Validate(), checkTools(o), checkScaleOut(o), checkDeployed(o))
	if slices.Contains(o.Scenarios, "nodes") {
		errs = append(errs, o.Nodes.Validate())
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if *results == "" {
		*results = filepath.Join(*buildOut, "bench", time.Now().UTC().Format("20060102-150405")+"-"+*profile)
	}
	o.Results = *results
	self, err := os.Executable()
	o.Self = self
	return o, err
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

// nodeRamp is the node ramp of profile p; the renew interval and lease
// duration are each column's.
func nodeRamp(p Profile, simulatorCPU float64) noderamp.Config {
	return noderamp.Config{Steps: p.NodeSteps, Hold: p.NodeHold, ReadyTimeout: 5 * time.Minute, SLO: time.Second, Registrars: 16,
		SimulatorCores: simulatorCPU, Simulator: nodesim.Defaults()}
}

// scaleOutOptions fills the paths left empty from where make build and
// make images put them.
func scaleOutOptions(so scaleout.Options, buildOut string) scaleout.Options {
	if so.K1M == "" {
		so.K1M = filepath.Join(buildOut, "bin", "k1m")
	}
	if so.ImagesDir == "" {
		so.ImagesDir = filepath.Join(buildOut, "images")
	}
	return so
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

// deployedOptions takes the k1m binary and the images from the scaleout
// flags (--k1m, --images-dir) and fills the stock binary's default.
func deployedOptions(d deployed.Options, so scaleout.Options, buildOut string) deployed.Options {
	d.K1M, d.ImagesDir = so.K1M, so.ImagesDir
	if d.StockK1M == "" {
		d.StockK1M = filepath.Join(buildOut, "stock", "bin", "k1m")
	}
	return d
}

// checkDeployed checks the deployed scenario's needs when it is chosen:
// both binaries, the images, root (it runs local clusters).
func checkDeployed(o bench.Options) error {
	if !slices.Contains(o.Scenarios, "deployed") {
		return nil
	}
	errs := []error{o.Deployed.Validate()}
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("--scenarios deployed: needs root (it runs local clusters: network namespaces, cgroups, containerd)"))
	}
	return errors.Join(errs...)
}

// override sets dst from a flag whose zero value means "the profile's".
func override(flag string, dst *int, v int) error {
	switch {
	case v < 0:
		return fmt.Errorf("%s %d: want a positive number, or leave it out for the profile's default", flag, v)
	case v > 0:
		*dst = v
	}
	return nil
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

// runEtcd is one etcd member in the foreground until SIGTERM.
func runEtcd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	m := etcd.Member{Host: "::1"}
	fs.StringVar(&m.Name, "name", "etcd", "member name")
	fs.StringVar(&m.DataDir, "data-dir", "", "data directory")
	fs.IntVar(&m.Port, "port", 2379, "client port (peer: port+1)")
	fs.BoolVar(&m.NoFsync, "unsafe-no-fsync", false, "skip fsync")
	fs.BoolVar(&m.Pprof, "pprof", false, "serve /debug/pprof on the client URL (CPU profiles of the benchmark)")
	fs.StringVar(&m.TLS.CAFile, "ca", "", "client CA")
	fs.StringVar(&m.TLS.CertFile, "cert", "", "serving certificate")
	fs.StringVar(&m.TLS.KeyFile, "key", "", "serving key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if m.DataDir == "" {
		return errors.New("--data-dir is empty: want a directory")
	}
	r, err := etcd.Start(ctx, m)
	if err != nil {
		return err
	}
	defer r.Stop()
	select {
	case <-ctx.Done():
		return nil
	case err := <-r.Err():
		return err
	}
}

// runNodeSimulator is the node ramp's kubelets (package nodesim): it
// takes commands on stdin and answers on stdout until stdin ends.
func runNodeSimulator(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("simulate-nodes", flag.ContinueOnError)
	kubeconfigPath := fs.String("kubeconfig", "", "the API server's kubeconfig")
	cfg := nodesim.Defaults()
	fs.DurationVar(&cfg.RenewInterval, "renew-interval", cfg.RenewInterval, "Lease renew interval")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", cfg.LeaseDuration, "the Leases' duration")
	fs.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "node status report interval (the kubelet's nodeStatusReportFrequency)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "heartbeats in flight at most")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfigPath == "" {
		return errors.New("--kubeconfig is empty: want the API server's kubeconfig")
	}
	restCfg, err := controlplane.ClientConfig(*kubeconfigPath)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	sim, err := nodesim.New(restCfg, cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go sim.Run(ctx)
	return nodesim.Serve(os.Stdin, os.Stdout, sim)
}
