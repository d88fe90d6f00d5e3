package bench

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench/noderamp"
	"k1m.dev/k1m/bench/stats"
)

// NodeColumn is one node ramp: a build at a renew interval.
type NodeColumn struct {
	Name           string // e.g. k1m-10s
	Variant        string // stock or k1m
	Renew          time.Duration
	SimulatorCores float64 // the simulator's CPU cap
	Result         noderamp.Result
	// Profiles break down the control plane's CPU at the profiled step:
	// the largest held, or the first when none held.
	ProfiledStep int
	Profiles     []ProcessCPUProfile `json:",omitempty"`
}

// cpuProfiledStep is the step whose CPU profiles a column's breakdown reads.
func cpuProfiledStep(res noderamp.Result) (noderamp.Step, bool) {
	for i := len(res.Steps) - 1; i >= 0; i-- {
		if res.Steps[i].Held {
			return res.Steps[i], true
		}
	}
	if len(res.Steps) > 0 && len(res.Steps[0].Profiles) > 0 {
		return res.Steps[0], true
	}
	return noderamp.Step{}, false
}

// nodeCPUProfiles breaks down the CPU profiles of the column's profiled step.
func nodeCPUProfiles(dir string, res noderamp.Result) (int, []ProcessCPUProfile, error) {
	step, ok := cpuProfiledStep(res)
	if !ok || len(step.Profiles) == 0 {
		return 0, nil, nil
	}
	profiles, err := readCPUProfiles(filepath.Join(dir, "nodes-"+strconv.Itoa(step.Nodes)), step.Profiles)
	return step.Nodes, profiles, err
}

// perThousandNodesMinute is CPU spent over a window at nodes nodes in
// CPU-seconds per 1,000 nodes per minute.
func perThousandNodesMinute(cpu, window time.Duration, nodes int) float64 {
	if nodes == 0 || window <= 0 {
		return math.NaN()
	}
	return cpu.Seconds() / window.Minutes() / (float64(nodes) / 1000)
}

// categoryCost is the CPU of category in the processes of group at the
// profiled step, per 1,000 nodes per minute.
func (c NodeColumn) categoryCost(group, category string) float64 {
	step, ok := cpuProfiledStep(c.Result)
	if !ok {
		return math.NaN()
	}
	return perThousandNodesMinute(categoryCPU(c.Profiles, group, category), step.Window, step.Nodes)
}

var nodeCSVHeader = []string{"column", "variant", "renew_s", "nodes", "held", "reason", "window_s", "mutating_p99_ms",
	"lease_writes_per_s", "status_reports_per_s", "node_patches_per_s", "not_ready",
	"apiserver_cores", "etcd_cores", "controller_manager_cores", "control_plane_cores",
	"apiserver_live_heap_mib", "etcd_live_heap_mib", "apiserver_rss_mib", "etcd_rss_mib",
	"simulator_cores", "simulator_cap_cores", "simulator_throttled_share", "simulator_late", "simulator_max_lateness_ms", "simulator_errors"}

func nodeCSVRow(c NodeColumn, r noderamp.Reading, held, reason string) []string {
	mib := func(b int64) string { return stats.CSVFloat(float64(b) / (1 << 20)) }
	return []string{c.Name, c.Variant, stats.CSVFloat(c.Renew.Seconds()), strconv.Itoa(r.Nodes), held, reason,
		stats.CSVFloat(r.Window.Seconds()), stats.CSVFloat(r.MutatingP99 * 1000),
		stats.CSVFloat(r.LeaseWriteRate), stats.CSVFloat(r.StatusRate), stats.CSVFloat(r.NodePatchRate), strconv.Itoa(r.NotReady),
		stats.CSVFloat(r.APIServerCores), stats.CSVFloat(r.EtcdCores), stats.CSVFloat(r.ControllerCores), stats.CSVFloat(r.ControlPlaneCores()),
		mib(r.APIServerHeap), mib(r.EtcdHeap), mib(r.APIServerRSS), mib(r.EtcdRSS),
		stats.CSVFloat(r.Simulator.Cores), stats.CSVFloat(c.SimulatorCores), stats.CSVFloat(r.Simulator.ThrottledShare),
		strconv.FormatInt(r.Simulator.Late, 10), stats.CSVFloat(ms(r.Simulator.MaxLateness)), strconv.FormatInt(r.Simulator.Errors, 10)}
}

// nodeCSV is nodes.csv: the idle reading and every step of every column.
func (rep *Report) nodeCSV() [][]string {
	rows := [][]string{nodeCSVHeader}
	for _, c := range rep.Nodes {
		rows = append(rows, nodeCSVRow(c, c.Result.Idle, "", "idle"))
		for _, s := range c.Result.Steps {
			rows = append(rows, nodeCSVRow(c, s.Reading, strconv.FormatBool(s.Held), s.Reason))
		}
	}
	return rows
}

// nodeCPUProfileCSV is nodes-profile.csv.
func (rep *Report) nodeCPUProfileCSV() [][]string {
	rows := [][]string{{"column", "nodes", "process", "category", "cpu_s_per_1000_nodes_per_min", "fraction_of_process"}}
	for _, c := range rep.Nodes {
		step, ok := cpuProfiledStep(c.Result)
		if !ok {
			continue
		}
		for _, p := range c.Profiles {
			for _, s := range p.Shares {
				rows = append(rows, []string{c.Name, strconv.Itoa(c.ProfiledStep), p.Process, s.Category,
					stats.CSVFloat(perThousandNodesMinute(s.CPU, step.Window, step.Nodes)), stats.CSVFloat(s.Fraction)})
			}
		}
	}
	return rows
}

// nodeMarkdown is the node ramp's part of the summary.
func (rep *Report) nodeMarkdown(b *strings.Builder) {
	if len(rep.Nodes) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Node heartbeats (simulated kubelets in a cgroup capped at %.2f cores, accounted apart): largest node count held (mutating p99 <= 1 s, no NotReady, renewals delivered)\n\n",
		rep.Nodes[0].SimulatorCores)
	b.WriteString("| column | largest held | stopped at | control-plane CPU-s per 1,000 nodes per minute (from idle / between steps) | nodes per control-plane core (from idle / between steps) | live heap per node, kube-apiserver / etcd (bytes) | simulator cores at the largest held |\n|---|---|---|---|---|---|---|\n")
	for _, c := range rep.Nodes {
		res := c.Result
		stop := "(every step held)"
		simCores := math.NaN()
		for _, s := range res.Steps {
			if !s.Held {
				stop = fmt.Sprintf("%d: %s", s.Nodes, s.Reason)
			} else {
				simCores = s.Simulator.Cores
			}
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s / %s | %s / %s | %s / %s | %s |\n", c.Name, res.MaxHeld, stop,
			figure(res.CPUSecondsPer1000NodesMinute, 2), figure(res.MarginalCPUSecondsPer1000NodesMinute, 2),
			figure(res.NodesPerCore, 0), figure(res.MarginalNodesPerCore, 0),
			figure(res.APIServerHeapPerNode, 0), figure(res.EtcdHeapPerNode, 0), figure(simCores, 2))
	}
	rep.nodeCPUProfileMarkdown(b)
}

func (rep *Report) nodeCPUProfileMarkdown(b *strings.Builder) {
	var cols []NodeColumn
	for _, c := range rep.Nodes {
		if len(c.Profiles) > 0 {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		return
	}
	b.WriteString("\n## Where the control plane's CPU goes under node heartbeats (CPU profiles over the window of the largest step held; CPU-s per 1,000 nodes per minute)\n\n| process | category |")
	for _, c := range cols {
		fmt.Fprintf(b, " %s (%d nodes) |", c.Name, c.ProfiledStep)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(cols)) + "\n")
	breakdownRows(b, len(cols), 2, func(i int, group, category string) float64 { return cols[i].categoryCost(group, category) })
}

// figure prints v with digits decimals, or "-" when it could not be
// computed (NaN: e.g. no line between steps when one step held).
func figure(v float64, digits int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', digits, 64)
}
