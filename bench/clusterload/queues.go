package clusterload

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/constants"
)

// controllerManagerAddress is where the bench reads the server's
// kube-controller-manager (it serves on loopback only).
var controllerManagerAddress = net.JoinHostPort("::1", strconv.Itoa(constants.ControllerManagerPort))

// Queue is one controller work queue over a window: whether its
// concurrent syncs keep up. A key waits in the queue for a free worker
// (Wait); a worker takes Work to sync it. Wait near zero while the
// workers are busy means more workers would not start keys sooner.
type Queue struct {
	Name          string
	AddsPerSecond float64
	Wait, Work    time.Duration // p99
}

// PriorityLevel is one API Priority and Fairness level over a window:
// whether kube-apiserver's in-flight limits (the seats APF shares out)
// held requests back. Wait is the p99 a dispatched request queued;
// Rejected counts requests refused for want of a seat (429).
type PriorityLevel struct {
	Name                string
	DispatchedPerSecond float64
	Wait                time.Duration
	Rejected            float64
}

// queues are the controller-manager's work queues that took at least
// one key a second over the window, by name.
func queues(before, after apimetrics.Snapshot, window time.Duration) []Queue {
	adds := after.SumsBy("workqueue_adds_total", "name")
	addsBefore := before.SumsBy("workqueue_adds_total", "name")
	wait, waitBefore := after.HistogramsBy("workqueue_queue_duration_seconds", "name"), before.HistogramsBy("workqueue_queue_duration_seconds", "name")
	work, workBefore := after.HistogramsBy("workqueue_work_duration_seconds", "name"), before.HistogramsBy("workqueue_work_duration_seconds", "name")
	var out []Queue
	for name, n := range adds {
		rate := (n - addsBefore[name]) / window.Seconds()
		if rate < 1 {
			continue
		}
		out = append(out, Queue{Name: name, AddsPerSecond: rate,
			Wait: p99(stats.SubBuckets(wait[name], waitBefore[name])), Work: p99(stats.SubBuckets(work[name], workBefore[name]))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// priorityLevels are the APF levels that dispatched or refused requests
// over the window, by name. The bench's own clients (the server's admin
// credentials, group k1m:cluster-admins) are in global-default.
func priorityLevels(before, after apimetrics.Snapshot, window time.Duration) []PriorityLevel {
	const waitFamily = "apiserver_flowcontrol_request_wait_duration_seconds"
	dispatched := after.SumsBy("apiserver_flowcontrol_dispatched_requests_total", "priority_level")
	dispatchedBefore := before.SumsBy("apiserver_flowcontrol_dispatched_requests_total", "priority_level")
	rejected := after.SumsBy("apiserver_flowcontrol_rejected_requests_total", "priority_level")
	rejectedBefore := before.SumsBy("apiserver_flowcontrol_rejected_requests_total", "priority_level")
	wait, waitBefore := after.HistogramsBy(waitFamily, "priority_level"), before.HistogramsBy(waitFamily, "priority_level")
	names := map[string]bool{}
	for name := range dispatched {
		names[name] = true
	}
	for name := range rejected {
		names[name] = true
	}
	var out []PriorityLevel
	for name := range names {
		d := dispatched[name] - dispatchedBefore[name]
		r := rejected[name] - rejectedBefore[name]
		if d == 0 && r == 0 {
			continue
		}
		out = append(out, PriorityLevel{Name: name, DispatchedPerSecond: d / window.Seconds(),
			Wait: p99(stats.SubBuckets(wait[name], waitBefore[name])), Rejected: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func p99(b []stats.Bucket) time.Duration {
	if len(b) == 0 {
		return 0
	}
	return time.Duration(stats.HistogramQuantile(0.99, b) * float64(time.Second))
}

// queuesMarkdown is each step's busiest queues and APF levels.
func (r *Result) queuesMarkdown(b *strings.Builder) {
	b.WriteString("\nkube-controller-manager's work queues (at least one key a second; p99 of a key's wait for a worker, and of its sync) and kube-apiserver's APF priority levels (p99 of a request's wait for a seat, requests refused):\n\n")
	b.WriteString("| build | round | nodes | queues: adds/s, wait p99, sync p99 | priority levels: dispatched/s, wait p99, rejected |\n|---|---:|---:|---|---|\n")
	for _, s := range r.Steps {
		var qs, ls []string
		for _, q := range s.Queues {
			qs = append(qs, fmt.Sprintf("%s %.0f/s, %v, %v", q.Name, q.AddsPerSecond, q.Wait.Round(time.Millisecond), q.Work.Round(time.Millisecond)))
		}
		for _, l := range s.PriorityLevels {
			ls = append(ls, fmt.Sprintf("%s %.0f/s, %v, %.0f", l.Name, l.DispatchedPerSecond, l.Wait.Round(time.Millisecond), l.Rejected))
		}
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s |\n", s.Flavour, s.Round, s.Nodes, strings.Join(qs, "; "), strings.Join(ls, "; "))
	}
}

// QueueCSV is cluster-queues.csv: each step's busy controller queues and
// APF priority levels, a row each.
func (r *Result) QueueCSV() [][]string {
	rows := [][]string{{"flavour", "round", "nodes", "what", "name", "per_s", "wait_p99_ms", "sync_p99_ms", "rejected"}}
	f := stats.CSVFloat
	ms := func(d time.Duration) string { return f(float64(d) / float64(time.Millisecond)) }
	for _, s := range r.Steps {
		head := []string{s.Flavour, fmt.Sprint(s.Round), fmt.Sprint(s.Nodes)}
		for _, q := range s.Queues {
			rows = append(rows, append(slices.Clone(head), "queue", q.Name, f(q.AddsPerSecond), ms(q.Wait), ms(q.Work), ""))
		}
		for _, l := range s.PriorityLevels {
			rows = append(rows, append(slices.Clone(head), "priority_level", l.Name, f(l.DispatchedPerSecond), ms(l.Wait), "", f(l.Rejected)))
		}
	}
	return rows
}
