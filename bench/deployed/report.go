package deployed

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/stats"
)

// Result is everything the scenario measured.
type Result struct {
	Lease  leaseflood.Config
	Nodes  int // Nodes of the node status flood
	Floods []Flood
}

// controlPlane is what the processes of the k1m binary cost together:
// `k1m server` and, in the stock build, its component processes.
func controlPlane(ps []Process) time.Duration {
	var cpu time.Duration
	for _, p := range ps {
		if p.Own {
			cpu += p.Usage.CPU
		}
	}
	return cpu
}

// CPUPerRenewal is the control plane's CPU over the window per renewal,
// in seconds (idle work included); NaN without renewals.
func (f Flood) CPUPerRenewal() float64 {
	return stats.Per(controlPlane(f.Processes).Seconds(), f.Result.Updates)
}

// IdleCores is the control plane's CPU rate, in cores, with no flood.
func (f Flood) IdleCores() float64 {
	if f.IdleElapsed <= 0 {
		return math.NaN()
	}
	return controlPlane(f.Idle).Seconds() / f.IdleElapsed.Seconds()
}

// ProcessPerRenewal is the named process's CPU per renewal, in seconds;
// NaN when the flavour has none of that name.
func (f Flood) ProcessPerRenewal(name string) float64 {
	for _, p := range f.Processes {
		if p.Name == name {
			return stats.Per(p.Usage.CPU.Seconds(), f.Result.Updates)
		}
	}
	return math.NaN()
}

// ProfilePerWrite is the profiled process's CPU in category per write, in
// seconds (the profile's sampled time, not /proc's); NaN without it.
func (f Flood) ProfilePerWrite(category string) float64 {
	for _, s := range f.Profile.Shares {
		if s.Category == category {
			return stats.Per(s.CPU.Seconds(), f.Result.Updates)
		}
	}
	return math.NaN()
}

// ProfileCSVHeader and ProfileCSVRows are the profiles' breakdowns: one
// row per flood and cost.
func (r *Result) ProfileCSVHeader() []string {
	return []string{"flavour", "round", "object", "process", "cost", "cpu_us_per_write", "share"}
}

// ProfileCSVRows are the breakdowns in the columns of ProfileCSVHeader.
func (r *Result) ProfileCSVRows() [][]string {
	var rows [][]string
	for _, f := range r.Floods {
		for _, s := range f.Profile.Shares {
			rows = append(rows, []string{f.Flavour, strconv.Itoa(f.Round), f.Object, ProfiledProcess[f.Flavour], s.Category,
				stats.CSVFloat(stats.Per(s.CPU.Seconds(), f.Result.Updates) * 1e6), stats.CSVFloat(s.Fraction)})
		}
	}
	return rows
}

// ProfiledProcess is what the API server's /debug/pprof profiles.
var ProfiledProcess = map[string]string{K1m: "k1m server (every component)", Stock: "kube-apiserver"}

// LoadGenPerRenewal is the load generator's CPU per renewal, in seconds.
func (f Flood) LoadGenPerRenewal() float64 {
	return stats.Per(f.LoadGen.CPU.Seconds(), f.Result.Updates)
}

// CoresBusy is every process of the server's tree and the load generator
// over the window, in cores: near the machine's cores, the machine was
// the limit; the load generator's share of it says whether it was.
func (f Flood) CoresBusy() float64 {
	cpu := f.LoadGen.CPU
	for _, p := range f.Processes {
		cpu += p.Usage.CPU
	}
	if f.Result.Elapsed <= 0 {
		return math.NaN()
	}
	return cpu.Seconds() / f.Result.Elapsed.Seconds()
}

// Line is a flood's progress line.
func (f Flood) Line() string {
	var per []string
	for _, p := range f.Processes {
		per = append(per, fmt.Sprintf("%s %s", p.Name, us(stats.Per(p.Usage.CPU.Seconds(), f.Result.Updates))))
	}
	return fmt.Sprintf("%s: %s writes/s, p50 %.1f ms, p99 %.1f ms, %d errors, %d conflicts; control plane %s CPU-us/write (%s); load generator %s; %.2f cores busy",
		f.Object, num(f.Result.Rate, 0), ms(f.Result.Latency.P50), ms(f.Result.Latency.P99), f.Result.Errors, f.Result.Conflicts,
		us(f.CPUPerRenewal()), strings.Join(per, ", "), us(f.LoadGenPerRenewal()), f.CoresBusy())
}

// coresText is each process's CPU rate over elapsed, in cores.
func coresText(ps []Process, elapsed time.Duration) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s %.3f", p.Name, p.Usage.CPU.Seconds()/elapsed.Seconds()))
	}
	return strings.Join(parts, ", ") + " cores"
}

// CSVHeader and CSVRows are the raw data: one row per process of each
// flood, then the flood's control-plane total as process "control plane".
func (r *Result) CSVHeader() []string {
	return []string{"flavour", "round", "object", "process", "count", "control_plane", "cpu_us_per_renewal", "idle_cores", "rss_mib",
		"renewals_per_s", "p50_ms", "p99_ms", "errors", "conflicts", "loadgen_cpu_us_per_renewal", "cores_busy", "elapsed_s"}
}

// CSVRows are the floods in the columns of CSVHeader.
func (r *Result) CSVRows() [][]string {
	var rows [][]string
	for _, f := range r.Floods {
		x := f.Result
		tail := []string{stats.CSVFloat(x.Rate), stats.CSVFloat(ms(x.Latency.P50)), stats.CSVFloat(ms(x.Latency.P99)), strconv.FormatInt(x.Errors, 10),
			strconv.FormatInt(x.Conflicts, 10), stats.CSVFloat(f.LoadGenPerRenewal() * 1e6), stats.CSVFloat(f.CoresBusy()), stats.CSVFloat(x.Elapsed.Seconds())}
		idle := map[string]float64{}
		for _, p := range f.Idle {
			idle[p.Name] = p.Usage.CPU.Seconds() / f.IdleElapsed.Seconds()
		}
		var rss float64
		for _, p := range f.Processes {
			if p.Own {
				rss += float64(p.Usage.RSS) / (1 << 20)
			}
			rows = append(rows, append([]string{f.Flavour, strconv.Itoa(f.Round), f.Object, p.Name, strconv.Itoa(p.Count), strconv.FormatBool(p.Own),
				stats.CSVFloat(stats.Per(p.Usage.CPU.Seconds(), x.Updates) * 1e6), stats.CSVFloat(idle[p.Name]), stats.CSVFloat(float64(p.Usage.RSS) / (1 << 20))}, tail...))
		}
		rows = append(rows, append([]string{f.Flavour, strconv.Itoa(f.Round), f.Object, "control plane", "", "true",
			stats.CSVFloat(f.CPUPerRenewal() * 1e6), stats.CSVFloat(f.IdleCores()), stats.CSVFloat(rss)}, tail...))
	}
	return rows
}

// medianOf is the median of metric over the flavour's floods of object.
func (r *Result) medianOf(flavour, object string, metric func(Flood) float64) float64 {
	var vals []float64
	for _, f := range r.Floods {
		if v := metric(f); f.Flavour == flavour && f.Object == object && !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return math.NaN()
	}
	return stats.Median(vals)
}

// processNames are the processes of either flavour, the control plane's
// first, in the order first seen.
func (r *Result) processNames() (own, other []string) {
	for _, f := range r.Floods {
		for _, p := range f.Processes {
			list := &other
			if p.Own {
				list = &own
			}
			if !slices.Contains(*list, p.Name) {
				*list = append(*list, p.Name)
			}
		}
	}
	return own, other
}

// objectText names what a flood wrote, in the tables.
var objectText = map[string]string{leaseflood.ObjectLease: "Lease renewals", leaseflood.ObjectNodeStatus: "node status updates"}

// Markdown is the scenario's section of summary.md.
func (r *Result) Markdown() string {
	var b strings.Builder
	l := r.Lease
	fmt.Fprintf(&b, "\n## Deployed: one `k1m server` of each build, as `make cluster` runs it (median of rounds)\n\n")
	fmt.Fprintf(&b, "A fresh cluster per round and build: one server, its own node, in its own memory cgroup (a quarter of the machine, the server's own rule). "+
		"k1m: kube-apiserver, the etcds, the kubelet and kube-proxy in the server process, the controller-manager and scheduler its children, "+
		"Events and Leases in the no-fsync etcd, GOGC/GOMEMLIMIT from the limit. "+
		"stock: Kubernetes 1.32.5 unpatched, each component its own process (`k1m <component>`), one etcd with fsync holding everything "+
		"(in the `k1m server` process), default GOGC; the same certificates, authentication (x509, bootstrap tokens, service accounts), "+
		"authorization (Node, RBAC) and admission. Lease renewals: %d Leases, Update with the last resourceVersion. "+
		"Node status updates: %d Nodes registered as kubelets register them, each update a Get from the cache and a strategic merge PATCH of nodes/status "+
		"moving the conditions' heartbeats (latency: the PATCH). %d workers, protobuf, no client-side limit; the watchers are the deployed components'. "+
		"%v warm-up + %v window. CPU is read per process of the server's tree (/proc/PID/stat); "+
		"the control plane is the processes of the k1m binary (kube-apiserver, etcd, controller-manager, scheduler, kubelet), "+
		"containerd and the pods are shown apart.\n", l.Leases, r.Nodes, l.Workers, l.Warmup, l.Duration)
	for _, object := range leaseflood.Objects {
		r.writeObject(&b, object)
	}
	return b.String()
}

func (r *Result) writeObject(b *strings.Builder, object string) {
	median := func(fl string, metric func(Flood) float64) float64 { return r.medianOf(fl, object, metric) }
	rate := func(f Flood) float64 { return f.Result.Rate }
	if math.IsNaN(median(Stock, rate)) && math.IsNaN(median(K1m, rate)) {
		return
	}
	fmt.Fprintf(b, "\n### %s\n\n", objectText[object])
	b.WriteString("| | writes/s | p50 ms | p99 ms | errors | control plane CPU-µs/write | idle cores | load generator CPU-µs/write | cores busy |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, fl := range Flavours {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", fl, num(median(fl, rate), 0),
			num(median(fl, func(f Flood) float64 { return ms(f.Result.Latency.P50) }), 1),
			num(median(fl, func(f Flood) float64 { return ms(f.Result.Latency.P99) }), 1),
			num(median(fl, func(f Flood) float64 { return float64(f.Result.Errors) }), 0),
			us(median(fl, Flood.CPUPerRenewal)), num(median(fl, Flood.IdleCores), 3),
			us(median(fl, Flood.LoadGenPerRenewal)), num(median(fl, Flood.CoresBusy), 2))
	}
	fmt.Fprintf(b, "\nk1m / stock: writes/s x%s, control-plane CPU per write x%s (the goal: x2 or more, x0.5 or less).\n\n",
		num(median(K1m, rate)/median(Stock, rate), 2), num(median(K1m, Flood.CPUPerRenewal)/median(Stock, Flood.CPUPerRenewal), 2))
	own, other := r.processNames()
	b.WriteString("CPU-µs per write by process:\n\n| process | stock | k1m |\n|---|---|---|\n")
	for _, name := range append(own, other...) {
		per := func(f Flood) float64 { return f.ProcessPerRenewal(name) }
		fmt.Fprintf(b, "| %s | %s | %s |\n", name, us(median(Stock, per)), us(median(K1m, per)))
	}
	r.writeProfile(b, object)
}

// writeProfile is the breakdown of the profiled processes' CPU per write.
func (r *Result) writeProfile(b *strings.Builder, object string) {
	var categories []string
	for _, f := range r.Floods {
		for _, s := range f.Profile.Shares {
			if f.Object == object && !slices.Contains(categories, s.Category) {
				categories = append(categories, s.Category)
			}
		}
	}
	if len(categories) == 0 {
		return
	}
	fmt.Fprintf(b, "\nWhere the profiled process's CPU went, CPU-µs per write (stock: %s; k1m: %s, so its etcds, controllers and kubelet are in it):\n\n| cost | stock | k1m |\n|---|---|---|\n",
		ProfiledProcess[Stock], ProfiledProcess[K1m])
	for _, c := range categories {
		per := func(f Flood) float64 { return f.ProfilePerWrite(c) }
		s, k := r.medianOf(Stock, object, per), r.medianOf(K1m, object, per)
		if s*1e6 < 0.5 && k*1e6 < 0.5 {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", c, us(s), us(k))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func us(seconds float64) string { return num(seconds*1e6, 0) }

// num formats v with prec decimals; "-" for NaN (a process the flavour
// does not have).
func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
