// Package deployed floods the control plane as users deploy it: a local
// cluster of one `k1m server` from the k1m build (the controller-manager
// and scheduler its children, every other component in its process,
// Leases and Events in the no-fsync etcd) against one from
// the stock build (Kubernetes 1.32.5 as kubeadm shapes it: each component
// its own process, one etcd with fsync, default GOGC; the same
// certificates, authentication, authorization and admission). Each
// cluster is brought up fresh, left to settle, read idle, then flooded
// with the Lease renewals of leaseflood; the CPU of every process of the
// server's tree is read over the window.
package deployed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/cpuprofile"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/pkg/clock"
)

// The two flavours, by the name of their build.
const (
	Stock = "stock"
	K1m   = "k1m"
)

// Flavours in the order the first round takes them.
var Flavours = []string{Stock, K1m}

// Defaults and fixed timings of the scenario.
const (
	DefaultDataRoot = "/var/lib/k1m-bench-deployed"
	// DefaultNodes: enough Nodes that each is written every few seconds
	// at the rates this machine carries, few enough to register in
	// seconds.
	DefaultNodes = 2000
	// Settle is how long a cluster is left alone once up (CoreDNS
	// starting, the controllers' first syncs) before its idle CPU is read
	// over IdleWindow.
	Settle     = 20 * time.Second
	IdleWindow = 10 * time.Second
)

// Options say where the two builds are.
type Options struct {
	K1M      string // make build's k1m
	StockK1M string // make build-stock's k1m
	// ImagesDir is the image archives the node imports.
	ImagesDir string
	// DataRoot holds each cluster's data, emptied before it starts.
	DataRoot string
	// Nodes is how many Nodes the node status flood registers and
	// updates (the Lease flood renews Config.Leases Leases).
	Nodes int
}

// Validate names the flag at fault.
func (o Options) Validate() error {
	var errs []error
	for _, b := range []struct{ flag, path, make string }{{"--k1m", o.K1M, "make build"}, {"--stock-k1m", o.StockK1M, "make build-stock"}} {
		if st, err := os.Stat(b.path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("%s %q: not an executable file (%s writes it)", b.flag, b.path, b.make))
		}
	}
	if archives, _ := filepath.Glob(filepath.Join(o.ImagesDir, "*.tar")); len(archives) == 0 {
		errs = append(errs, fmt.Errorf("--images-dir %q: no image archive (*.tar) there (make images writes them to _output/images)", o.ImagesDir))
	}
	if !filepath.IsAbs(o.DataRoot) || filepath.Clean(o.DataRoot) == "/" {
		errs = append(errs, fmt.Errorf("--deployed-data-root %q: want an absolute directory other than /, e.g. %s", o.DataRoot, DefaultDataRoot))
	}
	if o.Nodes < 1 {
		errs = append(errs, fmt.Errorf("--deployed-nodes %d: want at least 1, e.g. %d", o.Nodes, DefaultNodes))
	}
	return errors.Join(errs...)
}

// Binary is the k1m binary of a flavour.
func (o Options) Binary(flavour string) string {
	if flavour == Stock {
		return o.StockK1M
	}
	return o.K1M
}

// Process is what the processes of one name cost over a window.
type Process struct {
	Name  string
	Count int  // processes of this name
	Own   bool // of the k1m binary: the control plane (and kubelet)
	Usage proc.Usage
}

// Flood is one flood (of Lease renewals or of node status updates)
// against one flavour's fresh cluster.
type Flood struct {
	Flavour string
	Round   int
	Object  string // leaseflood.ObjectLease or leaseflood.ObjectNodeStatus
	Result  leaseflood.Result
	// Idle is every process of the server's tree over IdleWindow before
	// the flood; Processes the same over the flood's window.
	Idle, Processes []Process
	IdleElapsed     time.Duration
	LoadGen         proc.Usage // this process, the load generator, over the window
	// Profile is the CPU breakdown of the process behind the API
	// server's /debug/pprof over the window: the whole `k1m server` in
	// the k1m build, kube-apiserver alone in the stock one.
	Profile struct {
		Total  time.Duration
		Shares []cpuprofile.Share
	}
}

// Run brings up each flavour's cluster once per round, alternating the
// order, and floods it with Lease renewals (cfg's Leases and workers),
// then with node status updates (o.Nodes Nodes, cfg's workers); the
// deployed components are the watchers: cfg.Watchers is not used. Logs go
// under runsDir; each finished flood is given to done (so that a failure
// later keeps it).
func Run(ctx context.Context, o Options, rounds int, cfg leaseflood.Config, runsDir string, out io.Writer, done func(Flood) error) error {
	cfg.Watchers = 0
	for round := 1; round <= rounds; round++ {
		order := slices.Clone(Flavours)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, flavour := range order {
			clusterDir := filepath.Join(runsDir, fmt.Sprintf("deployed-%s-%d", flavour, round))
			fmt.Fprintf(out, "deployed, round %d/%d, %s: bringing up one `k1m server` (logs in %s)\n", round, rounds, flavour, clusterDir)
			shape := scaleout.Shape{Name: "deployed-" + flavour, Servers: 1, K1M: o.Binary(flavour), ServerArgs: ServerArgs}
			so := scaleout.Options{ImagesDir: o.ImagesDir, DataRoot: o.DataRoot}
			err := scaleout.WithShape(ctx, shape, so, clusterDir, out, func(c *scaleout.Cluster) error {
				idle, idleElapsed, err := idleRead(ctx, c, out)
				if err != nil {
					return err
				}
				for _, object := range leaseflood.Objects {
					objectCfg := cfg
					objectCfg.Object = object
					if object == leaseflood.ObjectNodeStatus {
						objectCfg.Leases = o.Nodes
					}
					fmt.Fprintf(out, "deployed, round %d/%d, %s, %s: %d objects, %d workers, %v warm-up + %v\n",
						round, rounds, flavour, object, objectCfg.Leases, cfg.Workers, cfg.Warmup, cfg.Duration)
					f, err := flood(ctx, c, objectCfg, ProfilePath(clusterDir, object))
					if err != nil {
						return fmt.Errorf("%s flood: %w", object, err)
					}
					f.Flavour, f.Round, f.Object, f.Idle, f.IdleElapsed = flavour, round, object, idle, idleElapsed
					fmt.Fprintf(out, "  %s\n", f.Line())
					if err := done(f); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", flavour, round, err)
			}
		}
	}
	return nil
}

// idleRead settles the cluster, then reads its processes over IdleWindow.
func idleRead(ctx context.Context, c *scaleout.Cluster, out io.Writer) ([]Process, time.Duration, error) {
	if err := clock.Sleep(ctx, Settle); err != nil {
		return nil, 0, err
	}
	members, err := proc.Tree(c.ServerPID(1))
	if err != nil {
		return nil, 0, fmt.Errorf("the server's processes: %w", err)
	}
	before := ReadAll(members)
	start := time.Now()
	if err := clock.Sleep(ctx, IdleWindow); err != nil {
		return nil, 0, err
	}
	idle, elapsed := Group(members, before, ReadAll(members)), time.Since(start)
	fmt.Fprintf(out, "  idle: %s\n", coresText(idle, elapsed))
	return idle, elapsed, nil
}

// ServerArgs turn on kube-apiserver's /debug/pprof in both builds (off in
// a `k1m server` otherwise), so that each flood is profiled, and keep
// CoreDNS at its 2 replicas (FixedCoreDNS).
var ServerArgs = []string{"--kube-apiserver-arg=profiling=true", FixedCoreDNS}

// FixedCoreDNS is on every benchmark server: CoreDNS stays at 2 replicas
// whatever the simulated nodes. k1m's scaler would otherwise add one per
// 100 of them, and the scheduler place them on simulated nodes, a load
// the recorded runs before the scaler did not have.
const FixedCoreDNS = "--dns-nodes-per-replica=0"

// ProfilePath is where the CPU profile of a flood of object is written in
// its cluster's directory.
func ProfilePath(clusterDir, object string) string {
	return filepath.Join(clusterDir, object+".cpu.pprof")
}

// flood runs one flood, reading every process of the server's tree and
// the load generator at the window's edges, and profiling, over the
// window, the process behind the API server's /debug/pprof (the whole
// `k1m server` in the k1m build, kube-apiserver in the stock one) into
// profilePath.
func flood(ctx context.Context, c *scaleout.Cluster, cfg leaseflood.Config, profilePath string) (Flood, error) {
	var f Flood
	var members []proc.Member
	var err error
	var edges []map[int]proc.Usage
	var loadGen []proc.Usage
	profiled := make(chan error, 1)
	probe := func() error {
		if len(edges) == 0 { // components started since the idle read count too
			if members, err = proc.Tree(c.ServerPID(1)); err != nil {
				return err
			}
			go func() { profiled <- profile(ctx, c, cfg.Duration, profilePath) }()
		}
		edges = append(edges, ReadAll(members))
		u, err := proc.ReadUsage(os.Getpid())
		loadGen = append(loadGen, u)
		return err
	}
	api := []*rest.Config{c.Config(1)}
	f.Result, err = leaseflood.RunSpread(ctx, leaseflood.Clients{Workers: api, Watchers: api}, cfg, probe)
	if len(edges) > 0 {
		err = errors.Join(err, <-profiled)
	}
	if err != nil {
		return f, err
	}
	f.Processes, f.LoadGen = Group(members, edges[0], edges[1]), loadGen[1].Sub(loadGen[0])
	f.Profile.Shares, f.Profile.Total, err = cpuprofile.Breakdown(profilePath)
	return f, err
}

// profile captures the CPU profile of the API server's process over window.
func profile(ctx context.Context, c *scaleout.Cluster, window time.Duration, path string) error {
	cfg := c.Config(1)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	return cpuprofile.Capture(ctx, client, cfg.Host+"/debug/pprof/profile", window, path)
}

// ReadAll reads every member's usage now; one that ended is left out.
func ReadAll(members []proc.Member) map[int]proc.Usage {
	out := map[int]proc.Usage{}
	for _, m := range members {
		if u, err := proc.ReadUsage(m.PID); err == nil {
			out[m.PID] = u
		}
	}
	return out
}

// Group sums, by name, what each member read at both edges cost between
// them, in the order of the members (the server first).
func Group(members []proc.Member, before, after map[int]proc.Usage) []Process {
	var out []Process
	index := map[string]int{}
	for _, m := range members {
		b, ok1 := before[m.PID]
		a, ok2 := after[m.PID]
		if !ok1 || !ok2 {
			continue
		}
		i, seen := index[m.Name]
		if !seen {
			i, index[m.Name] = len(out), len(out)
			out = append(out, Process{Name: m.Name, Own: m.Own})
		}
		d := a.Sub(b)
		p := &out[i]
		p.Count++
		p.Usage.CPU += d.CPU
		p.Usage.RSS += d.RSS
		p.Usage.PeakRSS += d.PeakRSS
	}
	return out
}
