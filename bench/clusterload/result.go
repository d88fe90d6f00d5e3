package clusterload

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/lograte"
	"k1m.dev/k1m/bench/stats"
)

// Step is one node count's window: from the first create of its load to
// the last endpoint of its pods ready. Its join burst (the new nodes
// registering and opening their watches) comes before, read apart.
type Step struct {
	Flavour      string
	Round        int
	Nodes        int
	Watches      int // the simulated nodes' open watches
	Pods         int // created and running this step
	Window       time.Duration
	Joined       time.Duration // from the first new node's registration until every new watch had listed
	JoinMutating CallP99       // the join burst's worst mutating call (not held to the SLO)
	JoinedNodes  int           // the nodes that registered in the join burst
	// JoinProcesses are the server's processes' CPU over the join burst
	// (Joined): what registering JoinedNodes nodes cost the control plane.
	JoinProcesses []Component   `json:",omitempty"`
	JoinProfile   *JoinProfile  `json:",omitempty"` // with Config.JoinProfile
	Created       time.Duration // the creates' span
	// Routed is from the first new node's registration until the route
	// publisher had written every Node's route (0: it writes none,
	// --pod-routes=provider); RouteProcesses the server's CPU over it and
	// RouteLateHeartbeats the simulated nodes' late heartbeats.
	Routed              time.Duration
	RouteProcesses      []Component `json:",omitempty"`
	RouteLateHeartbeats int64

	PodStartup, Scheduling stats.Latency // first seen to running and ready, first seen to bound
	BoundPerSecond         float64       // the scheduler's: pods from the first seen to the last bound
	EndpointsLag           time.Duration // from the last pod running to every endpoint ready

	WorstMutating, WorstList CallP99

	WatchEventsPerSecond, WatchBytesPerSecond float64
	WatchEventsByKind                         map[string]float64 // per second
	NodeEventsPerSecond                       float64            // received by the simulated nodes

	Queues         []Queue         `json:",omitempty"` // the controller-manager's busy work queues
	PriorityLevels []PriorityLevel `json:",omitempty"` // kube-apiserver's APF levels in use

	Processes     []Component
	APIServerHeap float64 // bytes in use in kube-apiserver's heap at the window's end
	BenchCores    float64 // this process: the simulated nodes and the load

	Renewals, LateHeartbeats, HeartbeatErrors int64
	Relists, ReportErrors                     int64
	NotReady                                  int            // simulated nodes not Ready at the window's end
	IdleLog                                   lograte.Window // the server's log lines with the nodes joined and idle
	Unfinished                                []string       `json:",omitempty"` // pods not running or endpoints not ready in time
	// Netpol is the NetworkPolicy probe after the window (netpolProbe).
	Netpol *NetpolProbe `json:",omitempty"`
	// Storm is the server's restart under the step's nodes (Config.Restart).
	Storm *Storm `json:",omitempty"`
	// Rolling is the servers' rolling restart under the step's nodes
	// (Config.Restart with Config.Servers above 1).
	Rolling []ServerRestart `json:",omitempty"`

	Held    bool
	Reasons []string `json:",omitempty"`
}

// CallP99 is a call's p99 over the window and the bound the SLO sets.
type CallP99 struct {
	Call  string
	P99   time.Duration
	Bound time.Duration
	Calls int
}

// Component is one process name's share of the window.
type Component struct {
	Name  string
	Count int
	Cores float64
	RSS   int64 // bytes at the window's end
}

func (s *Step) fill(run startup, endpointsReady time.Time, before, after reading) {
	s.Window = after.at.Sub(before.at)
	secs := s.Window.Seconds()
	s.Pods = run.running
	s.PodStartup, s.Scheduling = run.startup, run.scheduling
	s.BoundPerSecond = stats.Rate(int64(run.pods), run.lastBound.Sub(run.firstAdded))
	s.EndpointsLag = endpointsReady.Sub(run.last)
	s.WorstMutating = worstMutating(before, after)
	reads := map[string]bool{"LIST": true}
	s.WorstList = worst(after.metrics.Latencies(reads), before.metrics.Latencies(reads),
		func(c apimetrics.Call) time.Duration { return ListSLO[c.Scope] })
	a, b := after.metrics.WatchEvents(), before.metrics.WatchEvents()
	s.WatchEventsByKind = map[string]float64{}
	for kind, n := range a.Events {
		s.WatchEventsByKind[kind] = (n - b.Events[kind]) / secs
		s.WatchEventsPerSecond += s.WatchEventsByKind[kind]
	}
	for kind, n := range a.Bytes {
		s.WatchBytesPerSecond += (n - b.Bytes[kind]) / secs
	}
	s.NodeEventsPerSecond = float64(after.events-before.events) / secs
	s.Processes = components(before, after)
	s.Queues = queues(before.controllers, after.controllers, s.Window)
	s.PriorityLevels = priorityLevels(before.metrics, after.metrics, s.Window)
	s.APIServerHeap = after.metrics.Gauge("go_memstats_heap_inuse_bytes")
	s.BenchCores = after.self.Sub(before.self).CPU.Seconds() / secs
	hb := after.heartbeat.Sub(before.heartbeat)
	s.Renewals, s.LateHeartbeats, s.HeartbeatErrors = hb.Renewals, hb.Late, hb.Errors
	s.Relists, s.ReportErrors = after.relists-before.relists, after.reports-before.reports
}

// worstMutating is the mutating call with the worst p99 between two readings.
func worstMutating(before, after reading) CallP99 {
	return worst(after.metrics.Latencies(apimetrics.MutatingVerbs), before.metrics.Latencies(apimetrics.MutatingVerbs),
		func(apimetrics.Call) time.Duration { return MutatingSLO })
}

// worst is the call whose p99 over the window is the largest share of its
// bound, among those with minCalls calls or more.
func worst(after, before map[apimetrics.Call][]stats.Bucket, bound func(apimetrics.Call) time.Duration) CallP99 {
	var out CallP99
	share := -1.0
	for c, buckets := range after {
		d := stats.SubBuckets(buckets, before[c])
		n := 0.0
		for _, b := range d {
			n = max(n, b.Count)
		}
		limit := bound(c)
		if n < minCalls || limit <= 0 {
			continue
		}
		p99 := time.Duration(stats.HistogramQuantile(0.99, d) * float64(time.Second))
		if r := float64(p99) / float64(limit); r > share {
			share, out = r, CallP99{Call: c.String(), P99: p99, Bound: limit, Calls: int(n)}
		}
	}
	return out
}

// components is each process name's CPU over the window and memory at its
// end, the server's tree in its order.
func components(before, after reading) []Component {
	var out []Component
	rss := map[string]int64{}
	for _, m := range after.members {
		rss[m.Name] += after.usage[m.PID].RSS
	}
	for _, p := range deployed.Group(after.members, before.usage, after.usage) {
		out = append(out, Component{Name: p.Name, Count: p.Count, Cores: p.Usage.CPU.Seconds() / after.at.Sub(before.at).Seconds(), RSS: rss[p.Name]})
	}
	return out
}

// judge holds the step to the SLOs, and to having finished with every
// node Ready.
func (s *Step) judge(unfinished []string) {
	s.Unfinished = unfinished
	s.Reasons = append([]string(nil), unfinished...)
	if s.NotReady > 0 {
		s.Reasons = append(s.Reasons, fmt.Sprintf("%d simulated nodes NotReady", s.NotReady))
	}
	if s.WorstMutating.P99 > s.WorstMutating.Bound {
		s.Reasons = append(s.Reasons, fmt.Sprintf("mutating p99 %v (%s) over %v", s.WorstMutating.P99.Round(time.Millisecond), s.WorstMutating.Call, MutatingSLO))
	}
	if s.WorstList.Bound > 0 && s.WorstList.P99 > s.WorstList.Bound {
		s.Reasons = append(s.Reasons, fmt.Sprintf("list p99 %v (%s) over %v", s.WorstList.P99.Round(time.Millisecond), s.WorstList.Call, s.WorstList.Bound))
	}
	if s.PodStartup.P99 > PodStartupSLO {
		s.Reasons = append(s.Reasons, fmt.Sprintf("pod startup p99 %v over %v", s.PodStartup.P99.Round(time.Millisecond), PodStartupSLO))
	}
	s.Held = len(s.Reasons) == 0
}

// Line is a step's one-line summary.
func (s Step) Line() string {
	held := "held"
	if !s.Held {
		held = "NOT held: " + strings.Join(s.Reasons, "; ")
	}
	return fmt.Sprintf("%d nodes: pod startup p50/p99 %v/%v, %.0f pods bound/s, mutating p99 %v (%s), list p99 %v (%s), watch events %.0f/s (%.1f MiB/s), endpoints %v after the last pod; %s",
		s.Nodes, s.PodStartup.P50.Round(time.Millisecond), s.PodStartup.P99.Round(time.Millisecond), s.BoundPerSecond,
		s.WorstMutating.P99.Round(time.Millisecond), s.WorstMutating.Call, s.WorstList.P99.Round(time.Millisecond), s.WorstList.Call,
		s.WatchEventsPerSecond, s.WatchBytesPerSecond/(1<<20), s.EndpointsLag.Round(time.Millisecond), held)
}

// Cores is the CPU of the processes named name.
func (s Step) Cores(name string) float64 {
	for _, p := range s.Processes {
		if p.Name == name {
			return p.Cores
		}
	}
	return math.NaN()
}

// Result is the scenario's steps, each build's fresh server per round.
type Result struct {
	Config Config
	Steps  []Step
}

// LargestHeld is the largest node count up to which every step of
// flavour held in every round, 0 when the first did not.
func (r *Result) LargestHeld(flavour string) int {
	held := map[int]bool{}
	for _, s := range r.Steps {
		if s.Flavour != flavour {
			continue
		}
		if ok, seen := held[s.Nodes]; !seen || ok {
			held[s.Nodes] = s.Held
		}
	}
	counts := make([]int, 0, len(held))
	for n := range held {
		counts = append(counts, n)
	}
	sort.Ints(counts)
	largest := 0
	for _, n := range counts {
		if !held[n] {
			break
		}
		largest = n
	}
	return largest
}

// CSVHeader and CSVRows are the steps as raw data (cluster.csv); the
// processes are in cluster-processes.csv.
func (r *Result) CSVHeader() []string {
	return []string{"flavour", "round", "nodes", "watches", "pods", "window_s", "held", "reasons",
		"pod_startup_p50_ms", "pod_startup_p90_ms", "pod_startup_p99_ms", "scheduling_p99_ms", "bound_per_s", "endpoints_lag_ms",
		"worst_mutating_call", "worst_mutating_p99_ms", "worst_list_call", "worst_list_p99_ms", "worst_list_bound_ms",
		"watch_events_per_s", "watch_mib_per_s", "node_events_per_s", "node_events_per_s_per_node",
		"joined_s", "join_worst_mutating_call", "join_worst_mutating_p99_ms", "joined_nodes", "join_control_plane_cores", "join_cpu_ms_per_node", "created_s", "apiserver_heap_mib", "control_plane_cores", "bench_cores", "renewals", "late_heartbeats", "heartbeat_errors", "relists", "report_errors", "not_ready", "idle_log_lines_per_s",
		"netpol_watches", "netpol_isolated_pods", "netpol_rule_nodes", "netpol_events_per_peer_change", "netpol_unread_and_one_peer_events", "netpol_error",
		"routed_s", "routed_cpu_ms_per_node", "routed_late_heartbeats"}
}

func (r *Result) CSVRows() [][]string {
	var rows [][]string
	f := stats.CSVFloat
	ms := func(d time.Duration) string { return f(float64(d) / float64(time.Millisecond)) }
	for _, s := range r.Steps {
		rows = append(rows, append([]string{s.Flavour, fmt.Sprint(s.Round), fmt.Sprint(s.Nodes), fmt.Sprint(s.Watches), fmt.Sprint(s.Pods),
			f(s.Window.Seconds()), fmt.Sprint(s.Held), strings.Join(s.Reasons, "; "),
			ms(s.PodStartup.P50), ms(s.PodStartup.P90), ms(s.PodStartup.P99), ms(s.Scheduling.P99), f(s.BoundPerSecond), ms(s.EndpointsLag),
			s.WorstMutating.Call, ms(s.WorstMutating.P99), s.WorstList.Call, ms(s.WorstList.P99), ms(s.WorstList.Bound),
			f(s.WatchEventsPerSecond), f(s.WatchBytesPerSecond / (1 << 20)), f(s.NodeEventsPerSecond), f(s.NodeEventsPerSecond / float64(s.Nodes)),
			f(s.Joined.Seconds()), s.JoinMutating.Call, ms(s.JoinMutating.P99), fmt.Sprint(s.JoinedNodes), f(totalCores(s.JoinProcesses)), ms(s.JoinCPUPerNode()), f(s.Created.Seconds()), f(s.APIServerHeap / (1 << 20)), f(s.serverCores()), f(s.BenchCores),
			fmt.Sprint(s.Renewals), fmt.Sprint(s.LateHeartbeats), fmt.Sprint(s.HeartbeatErrors), fmt.Sprint(s.Relists), fmt.Sprint(s.ReportErrors), fmt.Sprint(s.NotReady), f(s.IdleLog.PerSecond)},
			append(netpolColumns(s.Netpol), f(s.Routed.Seconds()), ms(s.RoutedCPUPerNode()), fmt.Sprint(s.RouteLateHeartbeats))...))
	}
	return rows
}

// netpolColumns are a step's NetworkPolicy probe in cluster.csv.
func netpolColumns(p *NetpolProbe) []string {
	if p == nil {
		return []string{"", "", "", "", "", ""}
	}
	if p.Error != "" {
		return []string{fmt.Sprint(p.Watches), "", "", "", "", p.Error}
	}
	return []string{fmt.Sprint(p.Watches), fmt.Sprint(p.Selected), fmt.Sprint(p.RuleNodes), stats.CSVFloat(p.EventsPerPeerChange()), fmt.Sprint(p.UnreadEvents), ""}
}

// serverCores is the CPU of the server's whole tree (control plane, its
// node's kubelet, containerd and pods).
func (s Step) serverCores() float64 {
	return totalCores(s.Processes)
}

func totalCores(ps []Component) float64 {
	total := 0.0
	for _, p := range ps {
		total += p.Cores
	}
	return total
}

// JoinCPUPerNode is the server's whole tree's CPU over the join burst
// divided by the nodes that joined in it; 0 when none did.
func (s Step) JoinCPUPerNode() time.Duration {
	if s.JoinedNodes == 0 {
		return 0
	}
	return time.Duration(totalCores(s.JoinProcesses) * float64(s.Joined) / float64(s.JoinedNodes))
}

// RoutedCPUPerNode is the server's whole tree's CPU from the join burst's
// start until every route, divided by the nodes that joined; 0 when none
// did or no route was published.
func (s Step) RoutedCPUPerNode() time.Duration {
	if s.JoinedNodes == 0 {
		return 0
	}
	return time.Duration(totalCores(s.RouteProcesses) * float64(s.Routed) / float64(s.JoinedNodes))
}

// ProcessCSV is cluster-processes.csv: each step's processes, over the
// load's window and over the join burst.
func (r *Result) ProcessCSV() [][]string {
	rows := [][]string{{"flavour", "round", "nodes", "window", "process", "count", "cores", "rss_mib"}}
	for _, s := range r.Steps {
		for _, w := range []struct {
			name      string
			processes []Component
		}{{"load", s.Processes}, {"join", s.JoinProcesses}} {
			for _, p := range w.processes {
				rows = append(rows, []string{s.Flavour, fmt.Sprint(s.Round), fmt.Sprint(s.Nodes), w.name, p.Name, fmt.Sprint(p.Count),
					stats.CSVFloat(p.Cores), stats.CSVFloat(float64(p.RSS) / (1 << 20))})
			}
		}
	}
	return rows
}

// Markdown is the summary's section: each step of each build and round,
// then the largest node count held.
func (r *Result) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "\n## The whole cluster: %d pods a step in Deployments of %d with a Service each, created at %v pods/s; %d watches per simulated node\n\n",
		c.Pods, c.Replicas, c.Pace, len(NodeWatches))
	b.WriteString("Window: from the first create to the last endpoint ready (the join burst before it, the new nodes registering and listing at once, is in the last columns, not held to the SLOs). SLOs: mutating call p99 <= 1 s, list p99 <= 1/5/30 s (resource/namespace/cluster scope), pod startup p99 <= 5 s (first seen to running and ready). Watch events: what kube-apiserver sent, per second.\n\n")
	b.WriteString("| build | round | nodes | pod startup p50 / p99 | bound/s | endpoints after the last pod | worst mutating p99 | worst list p99 | watch events/s (MiB/s) | per node, events/s | server cores | heap in use of the API server's process, MiB (k1m: the whole server) | held | join burst: seconds, worst mutating p99 |\n")
	b.WriteString("|---|---:|---:|---|---:|---|---|---|---|---:|---:|---:|---|---|\n")
	for _, s := range r.Steps {
		held := "yes"
		if !s.Held {
			held = "no: " + strings.Join(s.Reasons, "; ")
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %v / %v | %.1f | %v | %v (%s) | %v (%s) | %.0f (%.2f) | %.2f | %.2f | %.0f | %s | %.0f s, %v (%s) |\n",
			s.Flavour, s.Round, s.Nodes, s.PodStartup.P50.Round(time.Millisecond), s.PodStartup.P99.Round(time.Millisecond), s.BoundPerSecond,
			s.EndpointsLag.Round(time.Millisecond), s.WorstMutating.P99.Round(time.Millisecond), s.WorstMutating.Call,
			s.WorstList.P99.Round(time.Millisecond), s.WorstList.Call, s.WatchEventsPerSecond, s.WatchBytesPerSecond/(1<<20),
			s.NodeEventsPerSecond/float64(s.Nodes), s.serverCores(), s.APIServerHeap/(1<<20), held,
			s.Joined.Seconds(), s.JoinMutating.P99.Round(time.Millisecond), s.JoinMutating.Call)
	}
	b.WriteString("\n")
	for _, flavour := range r.flavours() {
		fmt.Fprintf(&b, "%s: largest node count holding every SLO: %d.\n", flavour, r.LargestHeld(flavour))
	}
	r.joinMarkdown(&b)
	r.kindsMarkdown(&b)
	r.queuesMarkdown(&b)
	r.logMarkdown(&b)
	r.netpolMarkdown(&b)
	r.stormMarkdown(&b)
	r.rollingMarkdown(&b)
	return b.String()
}

// stormMarkdown is each step's server restart under its nodes.
func (r *Result) stormMarkdown(b *strings.Builder) {
	var rows []Step
	for _, s := range r.Steps {
		if s.Storm != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Reconnect storms: the server restarted under each step's nodes\n\nThe server stopped cleanly and started again, as a rolling upgrade does; every node's %d watches come back once it answers, resumed from the version they had or listed again (%s). Read from the new processes, which live only since the restart: objects the lists returned, LIST bytes, the watch cache's initial events (a streamed list's objects) and watch bytes, CPU until every watch was back, the highest peak RSS, the mutating p99 since the restart.\n\n", len(NodeWatches), r.listing())
	b.WriteString("| build | round | nodes | API ready after | watches back after | relisted / resumed | objects listed: watch cache / etcd | LIST MiB (largest) | initial events / watch MiB | server cores until back | CPU per node | highest peak RSS | worst mutating p99 | late heartbeats | not Ready |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|---|---|---:|---:|\n")
	for _, s := range rows {
		st := s.Storm
		if st.Error != "" {
			fmt.Fprintf(b, "| %s | %d | %d | %s |  |  |  |  |  |  |  |  |  |  |  |\n", s.Flavour, s.Round, s.Nodes, st.Error)
			continue
		}
		name, peak := st.peakRSS()
		fmt.Fprintf(b, "| %s | %d | %d | %.1f s | %.1f s | %d / %d | %.0f / %.0f | %.1f (%s) | %.0f / %.1f | %.2f | %v | %s %d MiB | %v (%s) | %d | %d |\n",
			s.Flavour, s.Round, s.Nodes, st.Up.Seconds(), st.Back.Seconds(), st.Relists, st.Resumed, st.CacheObjects, st.StorageObjects,
			st.TotalListBytes()/(1<<20), st.largestLists(3), st.InitEvents, st.WatchBytes/(1<<20), totalCores(st.Processes), st.CPUPerNode(s.Nodes).Round(10*time.Microsecond),
			name, peak>>20, st.WorstMutating.P99.Round(time.Millisecond), st.WorstMutating.Call, st.LateHeartbeats, st.NotReady)
	}
}

// StormCSV is each step's restart (cluster-storm.csv).
func (r *Result) StormCSV() [][]string {
	rows := [][]string{{"flavour", "round", "nodes", "up_s", "back_s", "relists", "resumed", "cache_objects", "storage_objects", "list_mib",
		"init_events", "watch_mib", "server_cores", "cpu_ms_per_node", "peak_rss_process", "peak_rss_mib", "worst_mutating_call", "worst_mutating_p99_ms", "late_heartbeats", "not_ready", "error"}}
	f := stats.CSVFloat
	for _, s := range r.Steps {
		st := s.Storm
		if st == nil {
			continue
		}
		name, peak := st.peakRSS()
		rows = append(rows, []string{s.Flavour, fmt.Sprint(s.Round), fmt.Sprint(s.Nodes), f(st.Up.Seconds()), f(st.Back.Seconds()), fmt.Sprint(st.Relists), fmt.Sprint(st.Resumed),
			f(st.CacheObjects), f(st.StorageObjects), f(st.TotalListBytes() / (1 << 20)), f(st.InitEvents), f(st.WatchBytes / (1 << 20)), f(totalCores(st.Processes)),
			f(float64(st.CPUPerNode(s.Nodes)) / float64(time.Millisecond)), name, f(float64(peak) / (1 << 20)), st.WorstMutating.Call,
			f(float64(st.WorstMutating.P99) / float64(time.Millisecond)), fmt.Sprint(st.LateHeartbeats), fmt.Sprint(st.NotReady), st.Error})
	}
	return rows
}

// netpolMarkdown is each step's NetworkPolicy probe.
func (r *Result) netpolMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "\nNetworkPolicy after each step's window: a policy isolates the pods of the step's first Deployment, allowing its clients; %d pods of the second become clients one at a time (each a change of the policy's peers), then %d pods of the third get a label no policy reads, then one more client (compiled after them). Events: what the simulated nodes' watches of their own rules (one a node) received.\n\n", ProbeChanges, ProbeChanges)
	b.WriteString("| build | round | nodes | rules watches | isolated pods | nodes with their rules | events a peer change | events: unread changes and one peer change |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Steps {
		p := s.Netpol
		if p == nil {
			continue
		}
		if p.Error != "" {
			fmt.Fprintf(b, "| %s | %d | %d | %d | %s |  |  |  |\n", s.Flavour, s.Round, s.Nodes, p.Watches, p.Error)
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d | %.1f | %d |\n", s.Flavour, s.Round, s.Nodes, p.Watches, p.Selected, p.RuleNodes, p.EventsPerPeerChange(), p.UnreadEvents)
	}
}

func (r *Result) flavours() []string {
	var out []string
	for _, s := range r.Steps {
		if !slices.Contains(out, s.Flavour) {
			out = append(out, s.Flavour)
		}
	}
	return out
}

// kindsMarkdown breaks the watch events down by kind at each step.
func (r *Result) kindsMarkdown(b *strings.Builder) {
	kinds := map[string]bool{}
	for _, s := range r.Steps {
		for k, v := range s.WatchEventsByKind {
			if v >= 1 { // the kinds that matter; the CSV has none of this, report.json all
				kinds[k] = true
			}
		}
	}
	if len(kinds) == 0 {
		return
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	b.WriteString("\nWatch events sent per second, by kind (kinds with at least one a second at some step):\n\n| build | round | nodes |")
	for _, k := range names {
		b.WriteString(" " + k + " |")
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---:|", len(names)) + "\n")
	for _, s := range r.Steps {
		fmt.Fprintf(b, "| %s | %d | %d |", s.Flavour, s.Round, s.Nodes)
		for _, k := range names {
			fmt.Fprintf(b, " %.0f |", s.WatchEventsByKind[k])
		}
		b.WriteString("\n")
	}
}

// logMarkdown gives the server's log lines a second with the nodes idle,
// and the busiest sources, at each step: a rate that grows with the nodes
// names the line to quiet.
func (r *Result) logMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "\nThe server's log with the step's nodes joined and idle (%v after they settled), lines a second: all, then the busiest sources (file:line of a klog line):\n\n", IdleLogWindow)
	b.WriteString("| build | round | nodes | lines/s | per 1,000 nodes | busiest sources, lines/s |\n|---|---:|---:|---:|---:|---|\n")
	for _, s := range r.Steps {
		var top []string
		for _, src := range s.IdleLog.Top {
			top = append(top, fmt.Sprintf("%s %.1f", src.Source, src.PerSecond))
		}
		fmt.Fprintf(b, "| %s | %d | %d | %.1f | %.1f | %s |\n", s.Flavour, s.Round, s.Nodes, s.IdleLog.PerSecond,
			s.IdleLog.PerSecond*1000/float64(max(s.Nodes, 1)), strings.Join(top, ", "))
	}
}

// joinMarkdown is what registering the nodes cost: each step's join burst
// (the new nodes created, their Leases renewed and their watches listed,
// at once), the server's CPU per node joined and its busiest processes,
// then k1m's CPU per node over stock's where both ran the same step.
func (r *Result) joinMarkdown(b *strings.Builder) {
	var rows []Step
	for _, s := range r.Steps {
		if s.JoinedNodes > 0 {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	if r.Config.JoinRate > 0 {
		fmt.Fprintf(b, "\n### Registering nodes: %v a second from one stream\n\n", r.Config.JoinRate)
		b.WriteString("The new nodes created one at a time, each then marked Ready by its Lease and listing what it watches. CPU: every process of the server's tree from the first create until every new watch had listed.\n\n")
	} else {
		b.WriteString("\n### Registering nodes: the join burst\n\n")
		b.WriteString("The new nodes created, marked Ready by their Leases and listing what they watch, all at once. CPU: every process of the server's tree over the burst.\n\n")
	}
	b.WriteString("| build | round | nodes joined (to) | seconds | nodes/s | server cores | CPU per node joined | busiest processes, cores |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range rows {
		fmt.Fprintf(b, "| %s | %d | %d (%d) | %.1f | %.0f | %.2f | %v | %s |\n", s.Flavour, s.Round, s.JoinedNodes, s.Nodes,
			s.Joined.Seconds(), float64(s.JoinedNodes)/s.Joined.Seconds(), totalCores(s.JoinProcesses),
			s.JoinCPUPerNode().Round(10*time.Microsecond), busiest(s.JoinProcesses, 3))
	}
	for _, line := range joinRatios(rows) {
		fmt.Fprintf(b, "\n%s", line)
	}
	b.WriteString("\n")
	routedMarkdown(b, rows)
	joinProfileMarkdown(b, rows)
}

// routedMarkdown is the join bursts until every pod route was written,
// when the route publisher wrote them.
func routedMarkdown(b *strings.Builder, rows []Step) {
	var routed []Step
	for _, s := range rows {
		if s.Routed > 0 {
			routed = append(routed, s)
		}
	}
	if len(routed) == 0 {
		return
	}
	b.WriteString("\nUntil every Node's pod route was written (the route publisher's pacing, `--pod-route-events-per-second`), from the burst's start:\n\n")
	b.WriteString("| build | round | nodes joined (to) | seconds | server cores | CPU per node joined | late heartbeats |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range routed {
		fmt.Fprintf(b, "| %s | %d | %d (%d) | %.1f | %.2f | %v | %d |\n", s.Flavour, s.Round, s.JoinedNodes, s.Nodes,
			s.Routed.Seconds(), totalCores(s.RouteProcesses), s.RoutedCPUPerNode().Round(10*time.Microsecond), s.RouteLateHeartbeats)
	}
}

// joinProfileShares is how many of a join profile's largest costs the
// summary names.
const joinProfileShares = 6

// joinProfileMarkdown names each join profile's largest costs.
func joinProfileMarkdown(b *strings.Builder, rows []Step) {
	for _, s := range rows {
		p := s.JoinProfile
		if p == nil {
			continue
		}
		if p.Error != "" {
			fmt.Fprintf(b, "\n%s, %d nodes, round %d: no join profile: %s\n", s.Flavour, s.Nodes, s.Round, p.Error)
			continue
		}
		var parts []string
		for _, sh := range p.Shares[:min(joinProfileShares, len(p.Shares))] {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", sh.Category, 100*sh.Fraction))
		}
		fmt.Fprintf(b, "\n%s, %d nodes, round %d: the API server's process over the burst's first %v, %v of CPU sampled: %s (`%s`)\n",
			s.Flavour, s.Nodes, s.Round, JoinProfileWindow, p.Total.Round(10*time.Millisecond), strings.Join(parts, ", "), filepath.Base(p.Path))
	}
}

// busiest names the n processes with the most cores.
func busiest(ps []Component, n int) string {
	sorted := slices.Clone(ps)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Cores > sorted[j].Cores })
	var parts []string
	for _, p := range sorted[:min(n, len(sorted))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", p.Name, p.Cores))
	}
	return strings.Join(parts, ", ")
}

// joinRatios are k1m's CPU per node joined over stock's, for each node
// count and round both builds ran.
func joinRatios(rows []Step) []string {
	type key struct{ nodes, round int }
	stock := map[key]Step{}
	for _, s := range rows {
		if s.Flavour == deployed.Stock {
			stock[key{s.Nodes, s.Round}] = s
		}
	}
	var out []string
	for _, s := range rows {
		st, ok := stock[key{s.Nodes, s.Round}]
		if s.Flavour != deployed.K1m || !ok || st.JoinCPUPerNode() == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("k1m/stock, %d nodes, round %d: CPU per node joined %.2fx, burst %.2fx as long.\n",
			s.Nodes, s.Round, float64(s.JoinCPUPerNode())/float64(st.JoinCPUPerNode()), s.Joined.Seconds()/st.Joined.Seconds()))
	}
	return out
}

// listing says how the simulated nodes list: LIST, or streamed
// (Config.WatchList).
func (r *Result) listing() string {
	if r.Config.WatchList {
		return "streamed lists: a watch's initial events, WatchList"
	}
	return "LIST"
}
