// Package scaleout measures how the Lease flood spreads over API servers
// and what raft costs: one local cluster of three `k1m server`s (each an
// API server and a member of both raft groups) flooded through its API
// servers 1, then 1 and 2, then 1, 2 and 3; and one lone server flooded
// the same way, with no raft peers. It reads each server's CPU and, since
// a two-core machine cannot show scale-out throughput, derives from where
// the CPU went what more cores and more machines would carry.
//
// Only the k1m build is measured: the question is how API servers and
// raft scale, not what the patches change.
package scaleout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/test/localcluster"
)

// The two clusters of the scenario, by the name of their directories.
const (
	ClusterA = "3-servers" // three servers, one raft group of three
	ClusterB = "1-server"  // a lone server: no raft peers
)

// ServersOf is how many servers a cluster of the scenario has.
func ServersOf(cluster string) int {
	if cluster == ClusterA {
		return 3
	}
	return 1
}

// Vias are the sets of API servers cluster A is flooded through.
var Vias = [][]int{{1}, {1, 2}, {1, 2, 3}}

// Defaults of the scenario's flags.
const (
	DefaultDataRoot     = "/var/lib/k1m-bench-scaleout"
	DefaultServerMemory = localcluster.DefaultServerMemory
	// IdleSettle is how long a cluster is left alone once up (CoreDNS
	// starting, leader elections) before IdleWindow reads its idle CPU,
	// before its first flood.
	IdleSettle = 20 * time.Second
	IdleWindow = 10 * time.Second
)

// Options say where the k1m build is and where the clusters keep their
// data.
type Options struct {
	K1M       string // the k1m binary (k1m flavour)
	ImagesDir string // the image archives every node imports
	// DataRoot holds each cluster's data, in DataRoot/<cluster>, emptied
	// before the cluster starts.
	DataRoot string
	// ServerMemory is every server's --memory-limit, the lone server's
	// too, so that the Go runtimes of both clusters size themselves alike.
	ServerMemory string
}

// Validate names the flag at fault.
func (o Options) Validate() error {
	var errs []error
	if st, err := os.Stat(o.K1M); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		errs = append(errs, fmt.Errorf("--k1m %q: %s (make build writes _output/bin/k1m)", o.K1M, notExecutable(err)))
	}
	if archives, _ := filepath.Glob(filepath.Join(o.ImagesDir, "*.tar")); len(archives) == 0 {
		errs = append(errs, fmt.Errorf("--images-dir %q: no image archive (*.tar) there (make images writes them to _output/images)", o.ImagesDir))
	}
	if !filepath.IsAbs(o.DataRoot) || filepath.Clean(o.DataRoot) == "/" {
		errs = append(errs, fmt.Errorf("--scaleout-data-root %q: want an absolute directory other than /, e.g. %s", o.DataRoot, DefaultDataRoot))
	}
	// localcluster checks the size (its error names SERVER_MEMORY, the
	// variable make cluster reads); empty would leave the lone server
	// sizing itself from the machine, unlike the three.
	if _, err := localcluster.New(localcluster.Options{Servers: 3, ServerMemory: o.ServerMemory}); err != nil || o.ServerMemory == "" {
		errs = append(errs, fmt.Errorf("--scaleout-server-memory %q: want a size such as 3Gi or 512Mi, every server's --memory-limit", o.ServerMemory))
	}
	return errors.Join(errs...)
}

func notExecutable(err error) string {
	if err != nil {
		return err.Error()
	}
	return "not an executable file"
}

// Result is everything the scenario measured.
type Result struct {
	// Cores of this machine: the C of the prediction (machines like
	// this one).
	Cores        int
	Lease        leaseflood.Config
	ServerMemory string
	Clusters     []ClusterInfo
	Floods       []Flood
}

// ClusterInfo is what was read of a cluster before its floods.
type ClusterInfo struct {
	Name string
	// IdleCores is each server's CPU rate, in cores, over IdleWindow with
	// no flood (controllers, kubelet, raft heartbeats), by index - 1.
	IdleCores []float64
}

// Flood is one Lease flood through some of a cluster's API servers.
type Flood struct {
	Cluster string
	Via     []int // the API servers the clients went through, from 1
	Round   int
	// Leader is the server whose no-fsync etcd member (the store of the
	// Leases) led its raft group before the flood, LeaderAfter after it;
	// 0: not known.
	Leader, LeaderAfter int
	// Result has the rate, latency and errors; its UpdatesBy follows Via.
	Result leaseflood.Result
	// Usage is each server process over the window (CPU; memory at its
	// end), by index - 1.
	Usage []proc.Usage
	// LoadGen is this process, the load generator, over the window.
	LoadGen proc.Usage
}

// ViaText is Via as "1,2".
func (f Flood) ViaText() string { return joinInts(f.Via, ",") }

func joinInts(ns []int, sep string) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}

// Share is the fraction of the flood's renewals that went through server
// k's API server.
func (f Flood) Share(k int) float64 {
	for j, v := range f.Via {
		if v == k && j < len(f.Result.UpdatesBy) && f.Result.Updates > 0 {
			return float64(f.Result.UpdatesBy[j]) / float64(f.Result.Updates)
		}
	}
	return 0
}

// CPUPerRenewal is server k's CPU over the window per renewal of the
// whole flood, in seconds; NaN without renewals.
func (f Flood) CPUPerRenewal(k int) float64 {
	return stats.Per(f.Usage[k-1].CPU.Seconds(), f.Result.Updates)
}

// TotalPerRenewal is every server's CPU per renewal, in seconds.
func (f Flood) TotalPerRenewal() float64 {
	var cpu time.Duration
	for _, u := range f.Usage {
		cpu += u.CPU
	}
	return stats.Per(cpu.Seconds(), f.Result.Updates)
}

// LoadGenPerRenewal is the load generator's CPU per renewal, in seconds.
func (f Flood) LoadGenPerRenewal() float64 {
	return stats.Per(f.LoadGen.CPU.Seconds(), f.Result.Updates)
}

// CoresBusy is the CPU the servers and the load generator used together
// over the window, in cores: near the machine's count, the machine was
// the limit.
func (f Flood) CoresBusy() float64 {
	cpu := f.LoadGen.CPU
	for _, u := range f.Usage {
		cpu += u.CPU
	}
	if f.Result.Elapsed <= 0 {
		return nan
	}
	return cpu.Seconds() / f.Result.Elapsed.Seconds()
}

// marginal is server k's CPU per renewal less what it spends idle over
// the same window: the part the renewals caused.
func (f Flood) marginal(k int, idleCores float64) float64 {
	cpu := f.Usage[k-1].CPU.Seconds() - idleCores*f.Result.Elapsed.Seconds()
	return stats.Per(cpu, f.Result.Updates)
}

// leaderKept tells whether one known server led raft the whole flood.
func (f Flood) leaderKept() bool { return f.Leader != 0 && f.Leader == f.LeaderAfter }
