package metricsload

import (
	"fmt"
	"math"
	"strings"
	"time"

	"k1m.dev/k1m/bench/stats"
)

// metrics-server's own metrics a window reads.
const (
	tickMetric     = "metrics_server_manager_tick_duration_seconds"
	requestsMetric = "metrics_server_kubelet_request_total"
)

// Step is one node count's window.
type Step struct {
	Flavour     string
	Round       int
	Nodes       int // simulated, the server's own node apart
	PodsPerNode int
	Window      time.Duration
	// Scrapes the simulated endpoints served over the window, and per
	// node and resolution (1 when metrics-server keeps its period).
	Scrapes              int64
	ScrapesPerNodePeriod float64
	Cores                float64       // metrics-server's, over the window
	CPUPerScrape         time.Duration // metrics-server's CPU per node scraped
	RSS                  int64         // metrics-server's resident memory after the window
	RSSPerNode           int64         // above its RSS before any simulated node, per node
	// Ticks are metrics-server's scrape cycles over the window: their
	// count, mean and p99 estimate (from its histogram).
	Ticks            int
	TickMean         time.Duration
	TickP99          time.Duration
	FailedRequests   int // kubelet requests that failed over the window
	NodesWithMetrics int // the Metrics API's nodes after the window
	BenchCores       float64
}

// fill sets the figures of s from its window's edges.
func (s *Step) fill(before, after reading, idleRSS int64) {
	elapsed := after.at.Sub(before.at)
	s.Scrapes = after.scrapes - before.scrapes
	if s.Nodes > 0 {
		s.ScrapesPerNodePeriod = float64(s.Scrapes) / float64(s.Nodes) / (elapsed.Seconds() / Resolution.Seconds())
	}
	cpu := after.usage.CPU - before.usage.CPU
	s.Cores = cpu.Seconds() / elapsed.Seconds()
	if s.Scrapes > 0 {
		s.CPUPerScrape = cpu / time.Duration(s.Scrapes)
	}
	s.RSS = after.usage.RSS
	if s.Nodes > 0 {
		s.RSSPerNode = (after.usage.RSS - idleRSS) / int64(s.Nodes)
	}
	ticks := stats.SubBuckets(after.metrics.Histogram(tickMetric), before.metrics.Histogram(tickMetric))
	s.Ticks = int(count(ticks))
	if s.Ticks > 0 {
		s.TickMean = seconds((after.metrics.HistogramSum(tickMetric) - before.metrics.HistogramSum(tickMetric)) / float64(s.Ticks))
		s.TickP99 = seconds(stats.HistogramQuantile(0.99, ticks))
	}
	failed := map[string]string{"success": "false"}
	s.FailedRequests = int(after.metrics.SumWhere(requestsMetric, failed) - before.metrics.SumWhere(requestsMetric, failed))
	s.BenchCores = (after.bench - before.bench).Seconds() / elapsed.Seconds()
}

// count is a cumulative histogram's observations.
func count(b []stats.Bucket) float64 {
	total := 0.0
	for _, x := range b {
		total = math.Max(total, x.Count)
	}
	return total
}

func seconds(v float64) time.Duration {
	if math.IsNaN(v) {
		return 0
	}
	return time.Duration(v * float64(time.Second))
}

// NodesPerCore is how many nodes one core of metrics-server scrapes in
// one resolution at this step's CPU per scrape.
func (s Step) NodesPerCore() int {
	if s.CPUPerScrape <= 0 {
		return 0
	}
	return int(Resolution / s.CPUPerScrape)
}

// KeptPeriod tells whether every node was scraped once a resolution
// (within a tenth) with no failed request, every cycle within the
// resolution, and the Metrics API had every node (the server's own too).
func (s Step) KeptPeriod() bool {
	return math.Abs(s.ScrapesPerNodePeriod-1) <= 0.1 && s.FailedRequests == 0 && s.TickP99 < Resolution && s.NodesWithMetrics >= s.Nodes+1
}

// Line is a step's one-line summary.
func (s Step) Line() string {
	return fmt.Sprintf("%d nodes of %d pods: %d scrapes (%.2f a node a resolution), metrics-server %.2f cores (%v a scrape, %d nodes a core), RSS %d MiB (%d KiB a node), %d cycles of mean %v, p99 %v, %d failed requests, %d nodes in the Metrics API",
		s.Nodes, s.PodsPerNode, s.Scrapes, s.ScrapesPerNodePeriod, s.Cores, s.CPUPerScrape.Round(time.Microsecond), s.NodesPerCore(),
		s.RSS>>20, s.RSSPerNode>>10, s.Ticks, s.TickMean.Round(time.Millisecond), s.TickP99.Round(time.Millisecond), s.FailedRequests, s.NodesWithMetrics)
}

// Result is the scenario's steps, a fresh server per round.
type Result struct {
	Config Config
	Steps  []Step
}

// CSVHeader and CSVRows are the steps as raw data (metrics.csv).
func (r *Result) CSVHeader() []string {
	return []string{"flavour", "round", "nodes", "pods_per_node", "window_s", "scrapes", "scrapes_per_node_period", "metrics_server_cores",
		"cpu_us_per_scrape", "nodes_per_core", "rss_mib", "rss_kib_per_node", "ticks", "tick_mean_s", "tick_p99_s", "failed_requests",
		"nodes_with_metrics", "bench_cores", "kept_period"}
}

func (r *Result) CSVRows() [][]string {
	f := stats.CSVFloat
	var rows [][]string
	for _, s := range r.Steps {
		rows = append(rows, []string{s.Flavour, fmt.Sprint(s.Round), fmt.Sprint(s.Nodes), fmt.Sprint(s.PodsPerNode), f(s.Window.Seconds()),
			fmt.Sprint(s.Scrapes), f(s.ScrapesPerNodePeriod), f(s.Cores), f(float64(s.CPUPerScrape) / float64(time.Microsecond)),
			fmt.Sprint(s.NodesPerCore()), f(float64(s.RSS) / (1 << 20)), f(float64(s.RSSPerNode) / (1 << 10)), fmt.Sprint(s.Ticks),
			f(s.TickMean.Seconds()), f(s.TickP99.Seconds()), fmt.Sprint(s.FailedRequests), fmt.Sprint(s.NodesWithMetrics),
			f(s.BenchCores), fmt.Sprint(s.KeptPeriod())})
	}
	return rows
}

// Markdown is the summary's section: a row per step, then what one
// instance keeps.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## metrics-server: simulated nodes of %d pods each, a window of %d resolutions (%v) per step\n\n",
		r.Config.PodsPerNode, r.Config.Periods, time.Duration(r.Config.Periods)*Resolution)
	b.WriteString("Each simulated node serves the kubelet's `/metrics/resource` on a port of its own, checked with the kubelet serving CA. " +
		"Kept: every node scraped once a resolution (within a tenth), no failed kubelet request, the cycles' p99 within the resolution, every node in the Metrics API.\n\n")
	b.WriteString("| build | round | nodes | scrapes a node a resolution | metrics-server cores | CPU a scrape | nodes a core keeps | RSS | RSS a node | cycles, mean / p99 | failed | Metrics API nodes | kept |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.3f | %v | %d | %d MiB | %d KiB | %d, %v / %v | %d | %d | %s |\n",
			s.Flavour, s.Round, s.Nodes, s.ScrapesPerNodePeriod, s.Cores, s.CPUPerScrape.Round(time.Microsecond), s.NodesPerCore(),
			s.RSS>>20, s.RSSPerNode>>10, s.Ticks, s.TickMean.Round(time.Millisecond), s.TickP99.Round(time.Millisecond),
			s.FailedRequests, s.NodesWithMetrics, yes(s.KeptPeriod()))
	}
	if s, ok := r.largestKept(); ok {
		fmt.Fprintf(&b, "\nAt %d nodes (%s, round %d) a scrape cost %v of metrics-server's CPU: one core scrapes %d nodes in a %v resolution, "+
			"and a scrape waiting longer than the %v request timeout fails, so one instance keeps its period while nodes x CPU a scrape stays under %v a core it has "+
			"(%d nodes a core).\n", s.Nodes, s.Flavour, s.Round, s.CPUPerScrape.Round(time.Microsecond), s.NodesPerCore(), Resolution, RequestTimeout, RequestTimeout, s.NodesWithinTimeout())
	}
	return b.String()
}

// NodesWithinTimeout is how many nodes one core scrapes within the
// kubelet request timeout, the bound one instance's cycle must keep.
func (s Step) NodesWithinTimeout() int {
	if s.CPUPerScrape <= 0 {
		return 0
	}
	return int(RequestTimeout / s.CPUPerScrape)
}

// largestKept is the largest step that kept its period.
func (r *Result) largestKept() (Step, bool) {
	var best Step
	found := false
	for _, s := range r.Steps {
		if s.KeptPeriod() && (!found || s.Nodes > best.Nodes) {
			best, found = s, true
		}
	}
	return best, found
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
