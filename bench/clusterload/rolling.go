package clusterload

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/poll"
)

// A rolling restart (Config.Restart with Config.Servers above 1): the
// servers restarted one at a time under the step's nodes, each stopped
// cleanly and started again, as a rolling upgrade does. The connections
// through a server that stops fail over at once to their balancers' next
// server, whose watch cache resumes their watches from the versions they
// had; once the server is back, they move back after a random part of the
// rebalance window and list again on its new watch cache. Each restart
// is read until every connection is back on its preferred server and
// every watch is back: per server, what its lists sent and its cores over
// that time (the restarted server's since it started), and the restarted
// server's peak memory and mutating p99.

// ServerRestart is one server's restart in a rolling restart.
type ServerRestart struct {
	Server int           // from 1
	Up     time.Duration // from the stop until its API server was ready
	// Settled is from the stop until every connection was back on its
	// preferred server and every watch back.
	Settled time.Duration
	Relists int64 // the nodes' watches' lists, over the restart
	// By server (index 0: server 1), over the restart: objects its lists
	// returned from the watch cache, its LIST MiB, its cores.
	CacheObjects, ListMiB, Cores []float64
	PeakRSS                      int64   // the restarted server's processes', summed
	WorstMutating                CallP99 // the restarted server's, since it started
	LateHeartbeats               int64
	NotReady                     int    // simulated nodes not Ready once settled
	Error                        string `json:",omitempty"`
}

// rollingRestart restarts every server of env in turn under r's nodes;
// a restart that fails ends it.
func rollingRestart(ctx context.Context, env *Env, bal *balancers, r stepRun) []ServerRestart {
	var out []ServerRestart
	for k := 1; k <= len(env.Servers); k++ {
		env.Progress(fmt.Sprintf("%d nodes: restarting server %d of %d under them", r.to, k, len(env.Servers)))
		sr := ServerRestart{Server: k}
		if err := sr.run(ctx, env, bal, r); err != nil {
			sr.Error = err.Error()
		}
		env.Progress(sr.Line())
		out = append(out, sr)
		if sr.Error != "" {
			break
		}
	}
	return out
}

func (sr *ServerRestart) run(ctx context.Context, env *Env, bal *balancers, r stepRun) error {
	before, err := readServers(ctx, env.Servers)
	if err != nil {
		return err
	}
	relists, heartbeats := r.nodes.totalRelists(), r.sim.Stats()
	start := time.Now()
	server := &env.Servers[sr.Server-1]
	pid, err := server.Restart(ctx)
	if err != nil {
		return fmt.Errorf("restarting server %d: %w", sr.Server, err)
	}
	server.PID = pid
	if sr.Server == 1 {
		env.ServerPID = pid
	}
	sr.Up = time.Since(start)
	err = poll.Until(ctx, time.Second, SyncTimeout, "every connection back on its preferred server and every watch back", func(context.Context) error {
		if n := bal.awayFromPreferred(); n > 0 {
			return fmt.Errorf("%d balancers have connections through a server other than their preferred one", n)
		}
		if n := r.nodes.totalDown(); n > 0 {
			return fmt.Errorf("%d watches not back", n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sr.Settled = time.Since(start)
	after, err := readServers(ctx, env.Servers)
	if err != nil {
		return err
	}
	sr.fill(before, after)
	sr.Relists = r.nodes.totalRelists() - relists
	sr.LateHeartbeats = r.sim.Stats().Sub(heartbeats).Late
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	sr.NotReady, err = notReady(ctx, client)
	return err
}

// fill reads each server's share from readings before and after the
// restart; the restarted server's processes and counters are new, so
// their whole values are the restart's.
func (sr *ServerRestart) fill(before, after []reading) {
	for i := range after {
		since := before[i]
		if i == sr.Server-1 {
			since = reading{at: before[i].at, usage: map[int]proc.Usage{}}
			for _, m := range after[i].members {
				since.usage[m.PID] = proc.Usage{} // started since: counted from zero
			}
		}
		sr.CacheObjects = append(sr.CacheObjects, after[i].metrics.Sum(cacheListedMetric)-since.metrics.Sum(cacheListedMetric))
		sr.ListMiB = append(sr.ListMiB, (listBytes(after[i].metrics)-listBytes(since.metrics))/(1<<20))
		cores := 0.0
		for _, c := range components(since, after[i]) {
			cores += c.Cores
		}
		sr.Cores = append(sr.Cores, cores)
	}
	restarted := after[sr.Server-1]
	for _, m := range restarted.members {
		sr.PeakRSS += restarted.usage[m.PID].PeakRSS
	}
	sr.WorstMutating = worstMutating(reading{}, restarted)
}

// listBytes are the LIST response bytes a server sent, all resources.
func listBytes(m apimetrics.Snapshot) float64 {
	total := 0.0
	for _, bytes := range m.HistogramSumsWhere(responseSizesMetric, "resource", map[string]string{"verb": "LIST"}) {
		total += bytes
	}
	return total
}

// readServers reads each server's processes and API metrics.
func readServers(ctx context.Context, servers []Server) ([]reading, error) {
	var out []reading
	for i, s := range servers {
		members, err := proc.Tree(s.PID)
		if err != nil {
			return nil, fmt.Errorf("server %d's processes: %w", i+1, err)
		}
		client, err := kubernetes.NewForConfig(s.Config)
		if err != nil {
			return nil, err
		}
		m, err := apimetrics.Scrape(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("server %d's metrics: %w", i+1, err)
		}
		out = append(out, reading{at: time.Now(), metrics: m, members: members, usage: deployed.ReadAll(members)})
	}
	return out, nil
}

// Line is a restart's one-line summary.
func (sr ServerRestart) Line() string {
	if sr.Error != "" {
		return fmt.Sprintf("server %d's restart: %s", sr.Server, sr.Error)
	}
	return fmt.Sprintf("server %d: ready after %.1f s, every connection back on its preferred server and every watch back after %.1f s, %d relists, objects listed by server %v, %d nodes NotReady",
		sr.Server, sr.Up.Seconds(), sr.Settled.Seconds(), sr.Relists, roundAll(sr.CacheObjects), sr.NotReady)
}

func roundAll(v []float64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x + 0.5)
	}
	return out
}

// rollingMarkdown is each step's rolling restart, a row per server.
func (r *Result) rollingMarkdown(b *strings.Builder) {
	var rows []Step
	for _, s := range r.Steps {
		if len(s.Rolling) > 0 {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Rolling restart: each server restarted in turn under each step's nodes\n\nThe simulated nodes reach the %d servers through the k1m agent's load balancer, one per connection of %d nodes. Each server stopped cleanly and started again: its connections fail over at once and resume their watches on the next server, then move back after a random part of the rebalance window once it is up, listing again on its new watch cache (%s). Read until every connection was back on its preferred server and every watch back: the watches' lists, then by server (1, 2, ...) the objects its lists returned from the watch cache, its LIST MiB and its cores over that time (the restarted server's since it started), the restarted server's peak RSS and mutating p99.\n\n",
		r.Config.Servers, r.Config.NodesPerConnection, r.listing())
	b.WriteString("| build | round | nodes | server restarted | API ready after | settled after | relists | objects listed, by server | LIST MiB, by server | cores, by server | peak RSS | worst mutating p99 | late heartbeats | not Ready |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---|---:|---:|\n")
	for _, s := range rows {
		for _, sr := range s.Rolling {
			if sr.Error != "" {
				fmt.Fprintf(b, "| %s | %d | %d | %d | %s |  |  |  |  |  |  |  |  |  |\n", s.Flavour, s.Round, s.Nodes, sr.Server, sr.Error)
				continue
			}
			fmt.Fprintf(b, "| %s | %d | %d | %d | %.1f s | %.1f s | %d | %s | %s | %s | %d MiB | %v (%s) | %d | %d |\n",
				s.Flavour, s.Round, s.Nodes, sr.Server, sr.Up.Seconds(), sr.Settled.Seconds(), sr.Relists,
				joinFloats(sr.CacheObjects, "%.0f"), joinFloats(sr.ListMiB, "%.1f"), joinFloats(sr.Cores, "%.2f"),
				sr.PeakRSS>>20, sr.WorstMutating.P99.Round(time.Millisecond), sr.WorstMutating.Call, sr.LateHeartbeats, sr.NotReady)
		}
	}
}

// RollingCSV is each step's rolling restart, a row per server and server
// read (cluster-rolling.csv).
func (r *Result) RollingCSV() [][]string {
	rows := [][]string{{"flavour", "round", "nodes", "restarted", "up_s", "settled_s", "relists", "server", "cache_objects", "list_mib", "cores",
		"restarted_peak_rss_mib", "worst_mutating_call", "worst_mutating_p99_ms", "late_heartbeats", "not_ready", "error"}}
	f := stats.CSVFloat
	for _, s := range r.Steps {
		for _, sr := range s.Rolling {
			for i := range max(1, len(sr.Cores)) {
				var objects, mib, cores string
				if i < len(sr.Cores) {
					objects, mib, cores = f(sr.CacheObjects[i]), f(sr.ListMiB[i]), f(sr.Cores[i])
				}
				rows = append(rows, []string{s.Flavour, fmt.Sprint(s.Round), fmt.Sprint(s.Nodes), fmt.Sprint(sr.Server), f(sr.Up.Seconds()), f(sr.Settled.Seconds()),
					fmt.Sprint(sr.Relists), fmt.Sprint(i + 1), objects, mib, cores, f(float64(sr.PeakRSS) / (1 << 20)), sr.WorstMutating.Call,
					f(float64(sr.WorstMutating.P99) / float64(time.Millisecond)), fmt.Sprint(sr.LateHeartbeats), fmt.Sprint(sr.NotReady), sr.Error})
			}
		}
	}
	return rows
}

// joinFloats formats each value, separated by " / ".
func joinFloats(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, " / ")
}
