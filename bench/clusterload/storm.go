package clusterload

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/poll"
)

// A reconnect storm: after a step (with Config.Restart), the server is
// stopped cleanly and started again, as a rolling upgrade does to each
// server, under the step's nodes. Every watch of every node ends; each is
// back once the new API server answers, all at once: resumed from the
// version it had when the new watch cache still holds it, else listed
// again (as client-go's reflector does). Its cost is
// read from the new processes, which live only since the restart: their
// CPU, their peak resident memory, kube-apiserver's lists (objects
// returned from the watch cache and from etcd, bytes sent) and its
// mutating p99 since it started.

// Metrics of the lists an API server served.
const (
	cacheListedMetric   = "apiserver_cache_list_returned_objects_total"
	storageListedMetric = "apiserver_storage_list_returned_objects_total"
	responseSizesMetric = "apiserver_response_sizes"
	// Streamed lists (Config.WatchList) are watches: their objects are
	// the watch cache's initial events, their bytes watch event bytes.
	initEventsMetric = "apiserver_init_events_total"
	watchSizesMetric = "apiserver_watch_events_sizes"
)

// Storm is what a server restart under a step's nodes cost.
type Storm struct {
	Up   time.Duration // from the stop until the restarted API server was ready
	Back time.Duration // from the stop until every node watch was back
	// Relists are the node watches' lists after the stop; Resumed the
	// watches back without one (the step's nodes times len(NodeWatches)
	// came back in all).
	Relists, Resumed int64
	// The restarted API server's lists since it started: objects returned
	// from the watch cache and from etcd, and LIST bytes sent by resource.
	CacheObjects, StorageObjects float64
	ListBytes                    map[string]float64
	// InitEvents are the objects the watch cache sent as watches' initial
	// events (streamed lists, and watches resumed from a version it
	// holds), WatchBytes every watch event's bytes.
	InitEvents, WatchBytes float64
	// Processes are the new processes' CPU from the stop until Back, and
	// their peak resident memory.
	Processes      []Component
	PeakRSS        map[string]int64
	WorstMutating  CallP99 // since the restart, the nodes' heartbeats among them
	LateHeartbeats int64   // heartbeats started more than a second late
	NotReady       int     // simulated nodes not Ready once every watch was back
	Error          string  `json:",omitempty"`
}

// Restarter restarts the server and returns its new PID.
type Restarter func(ctx context.Context) (int, error)

// restartUnderLoad restarts the server under r's nodes and waits until
// every node watch has listed again; env.ServerPID follows the restart.
func restartUnderLoad(ctx context.Context, env *Env, client kubernetes.Interface, r stepRun) *Storm {
	st := &Storm{}
	if err := st.run(ctx, env, client, r); err != nil {
		st.Error = err.Error()
	}
	return st
}

func (st *Storm) run(ctx context.Context, env *Env, client kubernetes.Interface, r stepRun) error {
	relists, recovered := r.nodes.totalRelists(), r.nodes.totalRecovered()
	heartbeats := r.sim.Stats()
	start := time.Now()
	pid, err := env.Restart(ctx)
	if err != nil {
		return fmt.Errorf("restarting the server: %w", err)
	}
	env.ServerPID = pid
	st.Up = time.Since(start)
	want := int64(r.to * len(NodeWatches))
	if err := waitListed(ctx, func() int64 { return r.nodes.totalRecovered() - recovered }, want, SyncTimeout); err != nil {
		return fmt.Errorf("the nodes' watches back after the restart: %w", err)
	}
	st.Back = time.Since(start)
	// The restarted controller-manager may not serve its metrics yet.
	var after reading
	err = poll.Until(ctx, time.Second, time.Minute, "the restarted server's readings", func(ctx context.Context) error {
		after, err = read(ctx, client, env.Config, pid, r)
		return err
	})
	if err != nil {
		return err
	}
	st.fill(start, heartbeats, relists, after)
	st.Resumed = max(0, r.nodes.totalRecovered()-recovered-st.Relists)
	st.NotReady, err = notReady(ctx, client)
	return err
}

// fill reads the storm from the new processes' reading after it: every
// process of the server's tree started after the stop, so its whole CPU
// is the storm's.
func (st *Storm) fill(start time.Time, heartbeats nodesim.Stats, relists int64, after reading) {
	st.Relists = after.relists - relists
	since := reading{at: start, usage: map[int]proc.Usage{}}
	for _, m := range after.members {
		since.usage[m.PID] = proc.Usage{}
	}
	st.Processes = components(since, after)
	st.PeakRSS = map[string]int64{}
	for _, m := range after.members {
		st.PeakRSS[m.Name] += after.usage[m.PID].PeakRSS
	}
	st.CacheObjects = after.metrics.Sum(cacheListedMetric)
	st.StorageObjects = after.metrics.Sum(storageListedMetric)
	st.ListBytes = map[string]float64{}
	for resource, bytes := range after.metrics.HistogramSumsWhere(responseSizesMetric, "resource", map[string]string{"verb": "LIST"}) {
		st.ListBytes[resource] = bytes
	}
	st.InitEvents = after.metrics.Sum(initEventsMetric)
	st.WatchBytes = after.metrics.HistogramSum(watchSizesMetric)
	st.WorstMutating = worstMutating(reading{}, after)
	st.LateHeartbeats = after.heartbeat.Sub(heartbeats).Late
}

// CPUPerNode is the server's CPU until every watch was back, per node.
func (st Storm) CPUPerNode(nodes int) time.Duration {
	if nodes <= 0 {
		return 0
	}
	return time.Duration(totalCores(st.Processes) * st.Back.Seconds() / float64(nodes) * float64(time.Second))
}

// TotalListBytes is the LIST bytes sent, every resource.
func (st Storm) TotalListBytes() float64 {
	total := 0.0
	for _, b := range st.ListBytes {
		total += b
	}
	return total
}

// largestLists names the n resources with the most LIST bytes.
func (st Storm) largestLists(n int) string {
	names := slices.Collect(maps.Keys(st.ListBytes))
	slices.SortFunc(names, func(a, b string) int {
		if st.ListBytes[a] != st.ListBytes[b] {
			if st.ListBytes[a] > st.ListBytes[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.1f MiB", name, st.ListBytes[name]/(1<<20)))
	}
	return strings.Join(parts, ", ")
}

// peakRSS is the process with the highest peak resident memory.
func (st Storm) peakRSS() (string, int64) {
	var name string
	var peak int64
	for _, n := range slices.Sorted(maps.Keys(st.PeakRSS)) {
		if st.PeakRSS[n] > peak {
			name, peak = n, st.PeakRSS[n]
		}
	}
	return name, peak
}
