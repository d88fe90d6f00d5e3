package proxymode

import (
	"fmt"
	"strings"
	"time"

	"k1m.dev/k1m/bench/stats"
)

// Result is the scenario's steps, each mode's fresh server per round.
type Result struct {
	Config Config
	Steps  []Step
}

// CSVHeader and CSVRows are the steps as raw data (proxy.csv).
func (r *Result) CSVHeader() []string {
	return []string{"mode", "round", "services", "created_s", "caught_up_s", "changes", "window_s",
		"programming_p50_ms", "programming_p90_ms", "programming_p99_ms", "programmed", "sync_p50_ms", "sync_p99_ms", "syncs",
		"proxy_cores", "proxy_cpu_ms_per_change"}
}

func (r *Result) CSVRows() [][]string {
	var rows [][]string
	f := stats.CSVFloat
	ms := func(d time.Duration) string { return f(float64(d) / float64(time.Millisecond)) }
	for _, s := range r.Steps {
		rows = append(rows, []string{s.Mode, fmt.Sprint(s.Round), fmt.Sprint(s.Services), f(s.Created.Seconds()), f(s.CaughtUp.Seconds()),
			fmt.Sprint(s.Changes), f(s.Window.Seconds()), ms(s.Programming.P50), ms(s.Programming.P90), ms(s.Programming.P99),
			fmt.Sprint(s.Programming.Count), ms(s.SyncP50), ms(s.SyncP99), fmt.Sprint(s.Syncs), f(s.ProxyCores), f(s.CPUPerChange())})
	}
	return rows
}

// Markdown is the summary's section: each step, then per Service count
// the ratios nftables / iptables of the medians.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## kube-proxy's modes: EndpointSlice changes at %v a second for %v at each Service count (stock build: kube-proxy its own process)\n\n", r.Config.ChangeRate, r.Config.Window)
	b.WriteString("Programming: kube-proxy's `kubeproxy_network_programming_duration_seconds`, from each change (the slice's trigger-time annotation) to its rules in place. First programming: from the step's last create until kube-proxy had nothing pending.\n\n")
	b.WriteString("| mode | round | Services | programming p50 / p99 | sync p50 / p99 (syncs) | kube-proxy cores | CPU-ms per change | first programming |\n|---|---:|---:|---|---|---:|---:|---:|\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %s | %d | %d | %v / %v | %v / %v (%d) | %.3f | %.1f | %v |\n", s.Mode, s.Round, s.Services,
			s.Programming.P50.Round(time.Millisecond), s.Programming.P99.Round(time.Millisecond), s.SyncP50.Round(time.Millisecond),
			s.SyncP99.Round(time.Millisecond), s.Syncs, s.ProxyCores, s.CPUPerChange(), s.CaughtUp.Round(100*time.Millisecond))
	}
	b.WriteString("\n")
	for _, n := range r.Config.Steps {
		median := func(mode string, v func(Step) float64) float64 {
			var vals []float64
			for _, s := range r.Steps {
				if s.Mode == mode && s.Services == n {
					vals = append(vals, v(s))
				}
			}
			return stats.Median(vals)
		}
		p99 := func(s Step) float64 { return float64(s.Programming.P99) }
		sync := func(s Step) float64 { return float64(s.SyncP99) }
		if median("iptables", p99) > 0 {
			fmt.Fprintf(&b, "%d Services, nftables / iptables: programming p99 x%.2f, sync p99 x%.2f, CPU per change x%.2f.\n", n,
				stats.Ratio(median("nftables", p99), median("iptables", p99)), stats.Ratio(median("nftables", sync), median("iptables", sync)),
				stats.Ratio(median("nftables", Step.CPUPerChange), median("iptables", Step.CPUPerChange)))
		}
	}
	return b.String()
}
