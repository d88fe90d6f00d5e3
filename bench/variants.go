// Package bench runs k1m's benchmark scenarios: the stock Kubernetes build
// and the k1m build side by side in one run, alternating, and writes raw
// data, a summary table and plots to a results folder.
package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k1m.dev/k1m/bench/controlplane"
)

// Variant names. Each ablation is the stock build with one of k1m's changes
// applied the way the stock binary allows, which is what the patch does:
// 0001 turns BtreeWatchCache off for good, 0002 sets GOGC/GOMEMLIMIT from
// the memory limit, and the no-fsync etcd for Leases/Events is wiring (no
// binary change). 0003 (renew interval) is the node ramp's long-interval columns.
const (
	Stock          = "stock"
	K1m            = "k1m"
	StockHashmap   = "stock+hashmap"
	StockGoTuning  = "stock+gotuning"
	StockNoFsync   = "stock+nofsync-leases"
	gomemlimitRate = 0.9
)

// Variants returns the variants by name, binaries under buildOut.
func Variants(buildOut string) (map[string]controlplane.Variant, error) {
	tuning, err := tuningEnv()
	if err != nil {
		return nil, err
	}
	stockBin := filepath.Join(buildOut, "stock", "bin")
	return map[string]controlplane.Variant{
		Stock: {Name: Stock, BinDir: stockBin},
		// The k1m binaries tune themselves; the env reaches the etcd
		// processes, which in k1m server run inside the tuned k1m process.
		K1m:           {Name: K1m, BinDir: filepath.Join(buildOut, "bin"), NoFsyncLeases: true, Env: tuning},
		StockHashmap:  {Name: StockHashmap, BinDir: stockBin, FeatureGates: "BtreeWatchCache=false"},
		StockGoTuning: {Name: StockGoTuning, BinDir: stockBin, Env: tuning},
		StockNoFsync:  {Name: StockNoFsync, BinDir: stockBin, NoFsyncLeases: true},
	}, nil
}

// tuningEnv is what patch 0002 sets with no cgroup limit: GOGC=800 and
// GOMEMLIMIT at 90% of physical memory.
func tuningEnv() ([]string, error) {
	total, err := memTotal()
	if err != nil {
		return nil, err
	}
	return []string{"GOGC=800", "GOMEMLIMIT=" + strconv.FormatInt(int64(float64(total)*gomemlimitRate), 10)}, nil
}

func memTotal() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}
