package dnsload

import (
	"fmt"
	"strings"
	"time"

	"k1m.dev/k1m/bench/stats"
)

// Result is the scenario's steps, a fresh server per round.
type Result struct {
	Config Config
	Steps  []Step
}

// Capacity is the highest rate held in every round (each round's steps
// held up to it), 0 when the first was not.
func (r *Result) Capacity() int {
	held := map[int]bool{}
	for _, s := range r.Steps {
		if ok, seen := held[s.Rate]; !seen || ok {
			held[s.Rate] = s.Held
		}
	}
	capacity := 0
	for _, rate := range r.Config.Rates {
		if !held[rate] {
			break
		}
		capacity = rate
	}
	return capacity
}

// CSVHeader and CSVRows are the steps as raw data (dns.csv).
func (r *Result) CSVHeader() []string {
	return []string{"round", "offered_per_s", "window_s", "sent", "answered", "failed", "lost", "lost_share", "answered_per_s",
		"latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_max_us", "coredns_cores", "coredns_cpu_us_per_query", "client_cores", "coredns_exited", "held"}
}

func (r *Result) CSVRows() [][]string {
	var rows [][]string
	f := stats.CSVFloat
	us := func(d time.Duration) string { return f(float64(d) / float64(time.Microsecond)) }
	for _, s := range r.Steps {
		l := s.Reading.Latency
		rows = append(rows, []string{fmt.Sprint(s.Round), fmt.Sprint(s.Rate), f(s.Window.Seconds()), fmt.Sprint(s.Reading.Sent),
			fmt.Sprint(s.Reading.Answered), fmt.Sprint(s.Reading.Failed), fmt.Sprint(s.Reading.Lost()), f(s.LostShare()), f(s.AnsweredPerSecond()),
			us(l.P50), us(l.P90), us(l.P99), us(l.Max), f(s.CoreDNSCores), us(s.CPUPerQuery), f(s.BenchCores), fmt.Sprint(s.Exited), fmt.Sprint(s.Held)})
	}
	return rows
}

// Markdown is the summary's section: each step, then the capacity.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## One CoreDNS replica: queries through the kube-dns Service at rising rates, %v each, over %d UDP sockets\n\n", r.Config.Window, r.Config.Sockets)
	fmt.Fprintf(&b, "Queries in turn: %s (NOERROR) and %s (NXDOMAIN, a pod's search path). Lost: no answer within %v. Held: at most %.1f%% lost or failed.\n\n",
		"`kubernetes.default.svc.<domain>`", "`kubernetes.default.default.svc.<domain>`", AnswerTimeout, 100*MaxLost)
	b.WriteString("| round | offered/s | answered/s | lost or failed | latency p50 / p99 | CoreDNS cores | CoreDNS CPU per query | client cores | held |\n|---:|---:|---:|---:|---|---:|---:|---:|---|\n")
	for _, s := range r.Steps {
		held := "yes"
		switch {
		case s.Exited:
			held = "no: CoreDNS's process exited"
		case !s.Held:
			held = "no"
		}
		fmt.Fprintf(&b, "| %d | %d | %.0f | %.3f%% | %v / %v | %.2f | %v | %.2f | %s |\n", s.Round, s.Rate, s.AnsweredPerSecond(), 100*s.LostShare(),
			s.Reading.Latency.P50.Round(time.Microsecond), s.Reading.Latency.P99.Round(time.Microsecond), s.CoreDNSCores,
			s.CPUPerQuery.Round(time.Microsecond), s.BenchCores, held)
	}
	fmt.Fprintf(&b, "\nHighest rate one replica held in every round: %d queries a second.\n", r.Capacity())
	return b.String()
}
