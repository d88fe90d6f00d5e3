package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/bench"
	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/creates"
	"k1m.dev/k1m/bench/dnsload"
	"k1m.dev/k1m/bench/etcdflood"
	"k1m.dev/k1m/bench/joins"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/metricsload"
	"k1m.dev/k1m/bench/noderamp"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proxymode"
	"k1m.dev/k1m/bench/schedule"
	"k1m.dev/k1m/bench/storebytes"
	"k1m.dev/k1m/pkg/config"
)

// tools are stand-ins for what k1m-build bench-tools builds.
func tools(t *testing.T) []string {
	path := filepath.Join(t.TempDir(), "benchplot")
	os.WriteFile(path, nil, 0o755)
	return []string{"--benchplot", path}
}

func TestParseRunProfileDefaultsAndOverrides(t *testing.T) {
	o, err := ParseRun(append(tools(t), "--profile", "full", "--duration", "7s", "--node-steps", "10,20", "--scenarios", "lease,nodes", "--results", "/tmp/x"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Rounds != BenchProfiles["full"].Rounds || o.Lease.Leases != 10000 {
		t.Errorf("profile defaults not applied: rounds %d, leases %d", o.Rounds, o.Lease.Leases)
	}
	if o.Lease.Duration != 7*time.Second || o.Etcd.Duration != 7*time.Second {
		t.Errorf("--duration not applied to both floods: %v %v", o.Lease.Duration, o.Etcd.Duration)
	}
	if len(o.Nodes.Steps) != 2 || o.Nodes.Steps[1] != 20 || strings.Join(o.Scenarios, ",") != "lease,nodes" || o.Results != "/tmp/x" {
		t.Errorf("overrides not applied: %+v %v %s", o.Nodes.Steps, o.Scenarios, o.Results)
	}
}

func TestParseRunRejectsBadInputNamingTheFlag(t *testing.T) {
	cases := map[string][]string{
		"--profile":       {"--profile", "huge"},
		"--node-steps":    {"--node-steps", "5000,1000"},
		"--scenarios":     {"--scenarios", "lease,kwok"},
		"--simulator-cpu": {"--simulator-cpu", "0"},
		"--node-hold":     {"--node-hold", "-5s"},
		"--long-renew ":   {"--long-renew", "10m"},
		"--workers":       {"--leases", "10", "--workers", "20"},
		"--long-renew":    {"--long-renew", "1500ms"},
		"--leases":        {"--leases", "-5"},
	}
	for flag, args := range cases {
		_, err := ParseRun(append(tools(t), args...))
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("ParseRun(%q) = %v; want an error naming %s", args, err, flag)
		}
	}
}

func TestParseRunWantsTheBuiltTools(t *testing.T) {
	for args, want := range map[string]string{
		"":                         "--benchplot is empty: give the path k1m-build bench-tools built (make bench does)",
		"--benchplot=/nonexistent": "--benchplot /nonexistent: stat /nonexistent: no such file or directory (k1m-build bench-tools builds it)",
	} {
		_, err := ParseRun(append(strings.Fields(args), "--scenarios", "lease"))
		if err == nil || err.Error() != want {
			t.Errorf("ParseRun(%q): got %v\nwant %s", args, err, want)
		}
	}
}

func TestScaleOutOnlyWhenNamed(t *testing.T) {
	o, err := ParseRun(tools(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Scenarios, ",") != "lease,etcd,nodes,watchcache" {
		t.Errorf("default scenarios %v: make bench must not bring up the scale-out clusters", o.Scenarios)
	}
	if o.ScaleOut.K1M != "_output/bin/k1m" || o.ScaleOut.ImagesDir != "_output/images" || o.ScaleOut.DataRoot != "/var/lib/k1m-bench-scaleout" || o.ScaleOut.ServerMemory != "3Gi" {
		t.Errorf("scaleout defaults %+v", o.ScaleOut)
	}
}

func TestParseRunScaleOutNamesEachBadFlag(t *testing.T) {
	dir := t.TempDir()
	_, err := ParseRun(append(tools(t), "--scenarios", "scaleout", "--k1m", filepath.Join(dir, "k1m"), "--images-dir", dir,
		"--scaleout-data-root", "relative", "--scaleout-server-memory", "3G", "--workers", "2"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, flag := range []string{"--k1m", "--images-dir", "--scaleout-data-root", "--scaleout-server-memory", "--workers"} {
		if !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("error does not name %s:\n%v", flag, err)
		}
	}
}

func TestParseRunFlagsLeavesTheRestAtTheirDefaults(t *testing.T) {
	o, err := ParseRunFlags(nil)
	if err != nil || !reflect.DeepEqual(o, DefaultRunOptions()) {
		t.Errorf("ParseRunFlags(nil) = %+v, %v\nwant %+v", o, err, DefaultRunOptions())
	}
	o, err = ParseRunFlags([]string{"--profile", "full", "--rounds", "2", "--watchers", "0", "--warmup", "0s", "--node-steps", "10,20",
		"--k1m", "/k1m", "--stock-k1m", "/stock", "--deployed-nodes", "5", "--scaleout-server-memory", "4Gi", "--ablation=false"})
	want := DefaultRunOptions()
	want.BenchProfile, want.Rounds, want.Watchers, want.Warmup, want.NodeSteps, want.Ablation = "full", 2, 0, 0, "10,20", false
	want.ScaleOut.K1M, want.ScaleOut.ServerMemory = "/k1m", "4Gi"
	want.Deployed.StockK1M, want.Deployed.Nodes = "/stock", 5
	if err != nil || !reflect.DeepEqual(o, want) {
		t.Errorf("ParseRunFlags = %+v, %v\nwant %+v", o, err, want)
	}
}

func TestRunOptionsDefaultFillsThePathsUnderOut(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 30, 5, 0, time.FixedZone("CET", 3600))
	o := DefaultRunOptions()
	o.BuildOut = "out"
	o.Default(now)
	want := DefaultRunOptions()
	want.BuildOut, want.Results = "out", "out/bench/20261123-113005-quick"
	want.ScaleOut.K1M, want.ScaleOut.ImagesDir = "out/bin/k1m", "out/images"
	want.Deployed.K1M, want.Deployed.ImagesDir, want.Deployed.StockK1M = "out/bin/k1m", "out/images", "out/stock/bin/k1m"
	if !reflect.DeepEqual(o, want) {
		t.Errorf("Default:\n got %+v\nwant %+v", o, want)
	}

	// Given paths stay; the deployed scenario takes --k1m and --images-dir.
	o = DefaultRunOptions()
	o.Results, o.ScaleOut.K1M, o.ScaleOut.ImagesDir, o.Deployed.StockK1M = "/r", "/k1m", "/images", "/stock"
	o.Default(now)
	want = DefaultRunOptions()
	want.Results, want.ScaleOut.K1M, want.ScaleOut.ImagesDir = "/r", "/k1m", "/images"
	want.Deployed.K1M, want.Deployed.ImagesDir, want.Deployed.StockK1M = "/k1m", "/images", "/stock"
	if !reflect.DeepEqual(o, want) {
		t.Errorf("Default with paths given:\n got %+v\nwant %+v", o, want)
	}
}

// validOptions are the defaults, completed, with the plotter in place.
func validOptions(t *testing.T) RunOptions {
	o := DefaultRunOptions()
	o.Benchplot = tools(t)[1]
	o.Default(time.Now())
	return o
}

func TestRunOptionsValidateNamesEachFlagAndItsValidForm(t *testing.T) {
	cases := []struct {
		name string
		set  func(*RunOptions)
		want string
	}{
		{"unknown profile, alone", func(o *RunOptions) { o.BenchProfile, o.Rounds = "huge", -1 },
			`--profile "huge": want quick or full`},
		{"negative overrides", func(o *RunOptions) { o.Rounds, o.Leases, o.Workers = -1, -5, -2 },
			"--rounds -1: want a positive number, or leave it out for the bench profile's default\n" +
				"--leases -5: want a positive number, or leave it out for the bench profile's default\n" +
				"--workers -2: want a positive number, or leave it out for the bench profile's default"},
		{"node steps out of order", func(o *RunOptions) { o.NodeSteps = "5000,1000" },
			"--node-steps \"5000,1000\": want ascending positive node counts, e.g. 2000,5000,10000\n" +
				"--node-steps is empty: want ascending node counts, e.g. 2000,5000,10000"},
		{"node steps without the node ramp", func(o *RunOptions) { o.NodeSteps, o.Scenarios = "x", "etcd" },
			`--node-steps "x": want ascending positive node counts, e.g. 2000,5000,10000`},
		{"unknown scenario", func(o *RunOptions) { o.Scenarios = "lease,kwok" },
			`--scenarios: unknown scenario "kwok", want some of lease,etcd,nodes,watchcache,scaleout,deployed,joins,schedule,cluster,proxy,dns,store,metrics`},
		{"long renew too long", func(o *RunOptions) { o.LongRenew = 10 * time.Minute },
			"--long-renew 10m0s: want whole seconds from 1s to " + config.MaxRenewInterval.String() + ", e.g. 40s"},
		{"long renew not whole seconds", func(o *RunOptions) { o.LongRenew = 1500 * time.Millisecond },
			"--long-renew 1.5s: want whole seconds from 1s to " + config.MaxRenewInterval.String() + ", e.g. 40s"},
		{"negative node hold", func(o *RunOptions) { o.NodeHold = -5 * time.Second },
			"--node-hold -5s: want a window of at least one renew interval, e.g. 20s (0: the bench profile's)"},
		{"more workers than leases", func(o *RunOptions) { o.Leases, o.Workers = 10, 20 },
			"--workers 20: want 1 to --leases (10), e.g. 64"},
		{"negative warm-up is the bench profile's", func(o *RunOptions) { o.Warmup, o.Watchers = -2*time.Second, -3 }, ""},
		{"simulator without CPU", func(o *RunOptions) { o.SimulatorCPU = 0 },
			"--simulator-cpu 0: want the simulator's CPU cap in cores, more than 0, e.g. 0.5"},
		{"simulator CPU unchecked without the node ramp", func(o *RunOptions) { o.SimulatorCPU, o.Scenarios = 0, "lease" }, ""},
		{"no plotter", func(o *RunOptions) { o.Benchplot = "" },
			"--benchplot is empty: give the path k1m-build bench-tools built (make bench does)"},
		{"scaleout: too few renewers", func(o *RunOptions) {
			o.Scenarios, o.Workers, o.ScaleOut.DataRoot = "scaleout", 2, "relative"
			o.ScaleOut.K1M, o.ScaleOut.ImagesDir = "/nonexistent/k1m", "/nonexistent"
		}, "--k1m \"/nonexistent/k1m\": stat /nonexistent/k1m: no such file or directory (make build writes _output/bin/k1m)\n" +
			"--images-dir \"/nonexistent\": no image archive (*.tar) there (make images writes them to _output/images)\n" +
			"--scaleout-data-root \"relative\": want an absolute directory other than /, e.g. /var/lib/k1m-bench-scaleout" +
			rootNeeded("scaleout") +
			"\n--workers 2: scaleout spreads the renewers over up to 3 API servers: want at least 3"},
		{"deployed", func(o *RunOptions) {
			o.Scenarios, o.Deployed.Nodes = "deployed", 0
			withoutBuilds(o)
		}, "--k1m \"/nonexistent/k1m\": not an executable file (make build writes it)\n" +
			"--stock-k1m \"/nonexistent/stock\": not an executable file (make build-stock writes it)\n" +
			"--images-dir \"/nonexistent\": no image archive (*.tar) there (make images writes them to _output/images)\n" +
			"--deployed-nodes 0: want at least 1, e.g. 2000" + rootNeeded("deployed")},
		{"joins", func(o *RunOptions) {
			o.Scenarios, o.Joins.Joins, o.Joins.Workers = "joins", 0, -1
			withoutBuilds(o)
		}, missingBuilds("joins") +
			"\n--joins 0: want at least 1, e.g. 1000\n--joins-workers -1: want at least 1, e.g. 50"},
		{"schedule", func(o *RunOptions) {
			o.Scenarios, o.ScheduleNodes, o.Schedule.Pods, o.Schedule.Workers = "schedule", "5000,1000", 0, 0
			withoutBuilds(o)
		}, missingBuilds("schedule") +
			"\n--schedule-nodes 5000,1000: want ascending positive node counts, e.g. 1000,5000\n--schedule-pods 0: want at least 1, e.g. 2000\n--schedule-workers 0: want at least 1, e.g. 50"},
		{"schedule scores not numbers", func(o *RunOptions) { o.ScheduleScores = "0,five" },
			`--schedule-scores "0,five": want whole numbers separated by commas, e.g. 0,5,1`},
		{"schedule scores out of range", func(o *RunOptions) {
			o.Scenarios, o.ScheduleScores = "schedule", "0,150"
			withoutBuilds(o)
		}, missingBuilds("schedule") +
			"\n--schedule-scores 150: want percentages from 0 (upstream's adaptive default) to 100, e.g. 0,5,1 (empty: the two builds at their defaults)"},
		{"cluster", func(o *RunOptions) {
			o.Scenarios, o.ClusterNodes, o.Cluster.Pods, o.Cluster.Replicas, o.Cluster.Pace, o.Cluster.NodesPerConnection = "cluster", "0", 15, 10, 0, 0
			withoutBuilds(o)
		}, missingBuilds("cluster") +
			"\n--cluster-nodes 0: want ascending positive node counts, e.g. 500,1000,2000\n--cluster-pods 15: want a positive multiple of --cluster-replicas (10), e.g. 1000" +
			"\n--cluster-pace 0: want pods a second above 0, e.g. 20\n--cluster-nodes-per-connection 0: want at least 1, e.g. 50"},
		{"proxy", func(o *RunOptions) {
			o.Scenarios, o.ProxyServices, o.Proxy.ChangeRate, o.Proxy.Window = "proxy", "10000,1000", 0, time.Millisecond
			withoutBuilds(o)
		}, missingBuilds("proxy") + "\n" +
			"--proxy-services 10000,1000: want ascending positive Service counts, e.g. 1000,10000\n" +
			"--proxy-change-rate 0: want changes a second above 0, e.g. 10\n--proxy-window 1ms: want at least 1s, e.g. 30s"},
		{"dns", func(o *RunOptions) {
			o.Scenarios, o.DNSRates, o.DNS.Window, o.DNS.Sockets = "dns", "1000,0", 0, 0
			withoutBuilds(o)
		}, missingBuilds("dns") + "\n" +
			"--dns-rates 1000,0: want ascending positive query rates, e.g. 1000,10000\n" +
			"--dns-window 0s: want at least 1s, e.g. 10s\n--dns-sockets 0: want at least 1, e.g. 16"},
		{"store", func(o *RunOptions) {
			o.Scenarios, o.Store.Agents, o.Store.PodsPerNode, o.Store.PodsPerDeployment, o.Store.Idle = "store", 2, 10, 7, time.Second
			withoutBuilds(o)
		}, missingBuilds("store") + "\n" +
			"--store-pods-per-deployment 7: want a divisor of the workload's 30 pods (nodes x --store-pods-per-node), e.g. 10\n" +
			"--store-idle 1s: want at least 10s, e.g. 5m0s"},
		{"metrics", func(o *RunOptions) {
			o.Scenarios, o.MetricsNodes, o.Metrics.PodsPerNode, o.Metrics.Periods = "metrics", "1000,20000", 0, 0
			withoutBuilds(o)
		}, missingBuilds("metrics") + "\n" +
			"--metrics-nodes up to 20000: want at most 12768, one kubelet port a node from 20000 below the ephemeral ports\n" +
			"--metrics-pods-per-node 0: want at least 1, e.g. 30\n--metrics-periods 0: want at least 1 resolution (15s), e.g. 4"},
		{"valid", func(o *RunOptions) {}, ""},
	}
	for _, tc := range cases {
		o := validOptions(t)
		tc.set(&o)
		err := o.Validate()
		if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || (err != nil && got != tc.want) {
			t.Errorf("%s: Validate() =\n%v\nwant\n%s", tc.name, err, tc.want)
		}
	}
}

// rootNeeded is the error of a scenario that runs local clusters, unless
// the test runs as root.
// withLocalClusterDefaults sets the local-cluster scenarios' options of
// want to their defaults, their paths o's.
func withLocalClusterDefaults(want *bench.Options, o RunOptions) {
	want.ScaleOut, want.Deployed, want.Joins = o.ScaleOut, o.Deployed, joins.Config{Joins: 1000, Workers: 50}
	want.Schedule = schedule.Config{Steps: []int{1000, 5000}, Pods: 2000, Workers: 50, PodCPU: 10}
	want.Cluster = clusterload.Config{Steps: []int{500, 1000, 2000}, Pods: 1000, Replicas: 10, Pace: 20, NodesPerConnection: 50}
	want.Proxy = proxymode.Config{Steps: []int{1000, 10000}, ChangeRate: 10, Window: 30 * time.Second}
	want.DNS = dnsload.Config{Rates: []int{1000, 2000, 5000, 10000, 20000, 40000}, Window: 10 * time.Second, Sockets: 16}
	want.Store = storebytes.Config{Agents: 2, PodsPerNode: 10, PodsPerDeployment: 10, Idle: 5 * time.Minute,
		SizingPodsPerNode: 30, SizingNodes: []int{1000, 10000, 100000}}
	want.Metrics = metricsload.Config{Steps: []int{1000, 2000, 4000}, PodsPerNode: 30, Periods: 4}
}

// withoutBuilds points the deployed scenarios' builds and images nowhere.
func withoutBuilds(o *RunOptions) {
	o.Deployed.K1M, o.Deployed.StockK1M, o.Deployed.ImagesDir = "/nonexistent/k1m", "/nonexistent/stock", "/nonexistent"
}

// missingBuilds is what Validate says of withoutBuilds for scenario.
func missingBuilds(scenario string) string {
	return "--k1m \"/nonexistent/k1m\": not an executable file (make build writes it)\n" +
		"--stock-k1m \"/nonexistent/stock\": not an executable file (make build-stock writes it)\n" +
		"--images-dir \"/nonexistent\": no image archive (*.tar) there (make images writes them to _output/images)" + rootNeeded(scenario)
}

func rootNeeded(scenario string) string {
	if os.Geteuid() == 0 {
		return ""
	}
	return "\n--scenarios " + scenario + ": needs root (it runs local clusters: network namespaces, cgroups, containerd)"
}

func TestRunOptionsCompleteResolvesTheRun(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	quick := BenchProfiles["quick"]
	o := validOptions(t)
	got, err := o.Complete()
	want := bench.Options{Results: o.Results, BuildOut: "_output", Self: self, Scenarios: []string{"lease", "etcd", "nodes", "watchcache"},
		Rounds: 1, Ablation: true, CPUProfiles: true, Lease: quick.Lease, Etcd: quick.Etcd,
		Nodes: noderamp.Config{Steps: []int{4000}, Hold: 20 * time.Second, ReadyTimeout: 5 * time.Minute, SLO: time.Second, Registrars: 16,
			Simulator: nodesim.Defaults(), SimulatorCores: 0.6},
		LongRenew: 40 * time.Second, WatchBenchtime: "300ms", WatchCount: 1,
		Benchplot: o.Benchplot, Progress: os.Stdout}
	withLocalClusterDefaults(&want, o)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Complete() of the defaults = %+v, %v\nwant %+v", got, err, want)
	}

	// The full profile, every override given.
	o = validOptions(t)
	o.BenchProfile, o.Scenarios, o.Ablation, o.CPUProfiles = "full", "nodes, lease", false, false
	o.Rounds, o.Leases, o.Workers, o.Watchers, o.Duration, o.Warmup = 2, 500, 50, 0, 7*time.Second, 0
	o.NodeSteps, o.NodeHold, o.LongRenew, o.SimulatorCPU, o.WatchBenchtime = "10, 20", 45*time.Second, 20*time.Second, 1.5, "2x"
	got, err = o.Complete()
	full := BenchProfiles["full"]
	want = bench.Options{Results: o.Results, BuildOut: "_output", Self: self, Scenarios: []string{"nodes", "lease"},
		Rounds: 2, Lease: leaseflood.Config{Leases: 500, Workers: 50, Watchers: 0, Warmup: 0, Duration: 7 * time.Second},
		Etcd: etcdflood.Config{Keys: full.Etcd.Keys, Clients: full.Etcd.Clients, Workers: full.Etcd.Workers, Warmup: 0, Duration: 7 * time.Second},
		Nodes: noderamp.Config{Steps: []int{10, 20}, Hold: 45 * time.Second, ReadyTimeout: 5 * time.Minute, SLO: time.Second, Registrars: 16,
			Simulator: nodesim.Defaults(), SimulatorCores: 1.5},
		LongRenew: 20 * time.Second, WatchBenchtime: "2x", WatchCount: 5,
		Benchplot: o.Benchplot, Progress: os.Stdout}
	withLocalClusterDefaults(&want, o)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Complete() of full with overrides = %+v, %v\nwant %+v", got, err, want)
	}

	// An invalid run resolves to nothing.
	o.Leases = -1
	if got, err := o.Complete(); err == nil || !reflect.DeepEqual(got, bench.Options{}) {
		t.Errorf("Complete() of --leases -1 = %+v, %v; want no run and an error", got, err)
	}
}

func TestServerArgFlagsReachEveryServerAndNeedDashes(t *testing.T) {
	o := DefaultRunOptions()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--server-arg=--kube-scheduler-arg=profiling=true", "--server-arg", "--v=2"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"--kube-scheduler-arg=profiling=true", "--v=2"}; !reflect.DeepEqual(o.ServerArgs, want) {
		t.Errorf("ServerArgs = %q, want %q", o.ServerArgs, want)
	}
	err := fs.Parse([]string{"--server-arg=profiling=true"})
	want := `invalid value "profiling=true" for flag -server-arg: want a ` + "`k1m server`" + ` flag starting with --, e.g. --kube-scheduler-arg=profiling=true`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestParseCreatesNamesEachFlag(t *testing.T) {
	cfg, kubeconfig, err := parseCreates([]string{"--kubeconfig=/k", "--parallel=1,5", "--count=10"})
	if want := (creates.Config{Count: 10, Parallel: []int{1, 5}}); err != nil || kubeconfig != "/k" || !reflect.DeepEqual(cfg, want) {
		t.Errorf("parseCreates = %+v, %q, %v; want %+v, /k, nil", cfg, kubeconfig, err, want)
	}
	_, _, err = parseCreates([]string{"--parallel=1,x", "--count=0"})
	want := "--parallel \"1,x\": want whole numbers separated by commas, e.g. 1,20\n--kubeconfig is empty: want the cluster's admin kubeconfig, e.g. /var/lib/k1m/server/admin.kubeconfig"
	if fmt.Sprint(err) != want {
		t.Errorf("parseCreates of bad flags = %v, want %s", err, want)
	}
	_, _, err = parseCreates([]string{"--kubeconfig=/k", "--count=0"})
	if want := "--count 0: want at least 1, e.g. 200"; fmt.Sprint(err) != want {
		t.Errorf("parseCreates --count=0 = %v, want %s", err, want)
	}
}
