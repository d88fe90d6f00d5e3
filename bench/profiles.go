package bench

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench/controlplane"
	"k1m.dev/k1m/bench/cpuprofile"
	"k1m.dev/k1m/bench/stats"
)

// ProcessCPUProfile is the CPU breakdown of one process over a flood's window.
type ProcessCPUProfile struct {
	Process string
	Total   time.Duration
	Shares  []cpuprofile.Share
}

// readCPUProfiles breaks down the CPU profiles controlplane.CPUProfile wrote
// in dir.
func readCPUProfiles(dir string, processes []string) ([]ProcessCPUProfile, error) {
	sort.Strings(processes)
	var out []ProcessCPUProfile
	for _, p := range processes {
		shares, total, err := cpuprofile.Breakdown(controlplane.CPUProfilePath(dir, p))
		if err != nil {
			return nil, err
		}
		out = append(out, ProcessCPUProfile{Process: p, Total: total, Shares: shares})
	}
	return out, nil
}

// cpuProfileGroup is what a breakdown column adds up: kube-apiserver, or
// every etcd member.
func cpuProfileGroup(process string) string {
	if strings.HasPrefix(process, "etcd") {
		return "etcd"
	}
	return process
}

// perUpdate is the category's CPU-µs per update of the row's flood, summed
// over the processes of group.
func (r LeaseRow) perUpdate(group, category string) float64 {
	if r.Result.Updates == 0 {
		return math.NaN()
	}
	return float64(categoryCPU(r.Profiles, group, category).Microseconds()) / float64(r.Result.Updates)
}

// categoryCPU is the CPU of category in the profiles of group's processes.
func categoryCPU(profiles []ProcessCPUProfile, group, category string) time.Duration {
	var cpu time.Duration
	for _, p := range profiles {
		if cpuProfileGroup(p.Process) != group {
			continue
		}
		for _, s := range p.Shares {
			if s.Category == category {
				cpu += s.CPU
			}
		}
	}
	return cpu
}

func (rep *Report) cpuProfileCSV() [][]string {
	rows := [][]string{{"variant", "round", "process", "category", "cpu_us_per_update", "fraction_of_process"}}
	for _, r := range rep.Lease {
		for _, p := range r.Profiles {
			for _, s := range p.Shares {
				per := math.NaN()
				if r.Result.Updates > 0 {
					per = float64(s.CPU.Microseconds()) / float64(r.Result.Updates)
				}
				rows = append(rows, []string{r.Variant, strconv.Itoa(r.Round), p.Process, s.Category, stats.CSVFloat(per), stats.CSVFloat(s.Fraction)})
			}
		}
	}
	return rows
}

// cpuProfileMarkdown is the breakdown table: one row per category and process
// group, CPU-µs per update, median of rounds, per variant.
func (rep *Report) cpuProfileMarkdown(b *strings.Builder) {
	variants := uniq(rep.Lease, func(r LeaseRow) string { return r.Variant })
	b.WriteString("\n## Where the CPU of a renewal goes (CPU profiles over the window; CPU-µs per update, median of rounds)\n\n")
	b.WriteString("| process | category |")
	for _, v := range variants {
		fmt.Fprintf(b, " %s |", v)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(variants)) + "\n")
	breakdownRows(b, len(variants), 0, func(i int, group, category string) float64 {
		return medianOf(rep.Lease, func(r LeaseRow) string { return r.Variant }, variants[i], func(r LeaseRow) float64 { return r.perUpdate(group, category) })
	})
}

// breakdownRows writes one table row per process group and cost, a cell
// per column (cost(i, ...) for column i, with digits decimals), leaving
// out costs that round to zero in every column.
func breakdownRows(b *strings.Builder, columns, digits int, cost func(i int, group, category string) float64) {
	for _, group := range []string{"kube-apiserver", "etcd"} {
		for _, category := range append(cpuprofile.Names(), cpuprofile.Other) {
			vals := make([]string, columns)
			any := false
			for i := range vals {
				v := cost(i, group, category)
				vals[i] = strconv.FormatFloat(v, 'f', digits, 64)
				any = any || v >= 0.5*math.Pow(10, -float64(digits))
			}
			if !any {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %s |\n", group, category, strings.Join(vals, " | "))
		}
	}
}

func (rep *Report) cpuProfiled() bool {
	for _, r := range rep.Lease {
		if len(r.Profiles) > 0 {
			return true
		}
	}
	return false
}
