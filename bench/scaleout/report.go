package scaleout

import (
	"fmt"
	"k1m.dev/k1m/bench/stats"
	"math"
	"strconv"
	"strings"
)

// row is one row of the tables: a cluster flooded through some API
// servers.
type row struct{ cluster, via string }

// rows are the rows in table order: cluster A by how many API servers
// it was flooded through, then the lone server.
func (r *Result) rows() []row {
	var out []row
	for _, cluster := range []string{ClusterA, ClusterB} {
		for _, via := range Vias {
			c := row{cluster, joinInts(via, ",")}
			for _, f := range r.Floods {
				if f.Cluster == c.cluster && f.ViaText() == c.via {
					out = append(out, c)
					break
				}
			}
		}
	}
	return out
}

// medianOf is the median of metric over the floods of c.
func (r *Result) medianOf(c row, metric func(Flood) float64) float64 {
	var vals []float64
	for _, f := range r.Floods {
		if f.Cluster == c.cluster && f.ViaText() == c.via {
			vals = append(vals, metric(f))
		}
	}
	return median(vals)
}

func us(seconds float64) string { return num(seconds*1e6, 0) }

// num formats v with prec decimals and thousands separators; "n/a" for
// NaN, "unbounded" for infinity.
func num(v float64, prec int) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 0):
		return "unbounded"
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	whole, frac, _ := strings.Cut(s, ".")
	sign := ""
	if strings.HasPrefix(whole, "-") {
		sign, whole = "-", whole[1:]
	}
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	if frac != "" {
		return sign + whole + "." + frac
	}
	return sign + whole
}

func clusterText(cluster string) string {
	if cluster == ClusterA {
		return "3 servers"
	}
	return "1 server"
}

// Line is a flood's progress line.
func (f Flood) Line() string {
	var per, cpu []string
	for _, k := range f.Via {
		per = append(per, num(f.Share(k)*f.Result.Rate, 0))
	}
	for k := 1; k <= len(f.Usage); k++ {
		cpu = append(cpu, fmt.Sprintf("server %d %s", k, us(f.CPUPerRenewal(k))))
	}
	return fmt.Sprintf("%s renewals/s (%s), p50 %.1f ms, p99 %.1f ms, %d errors, %d conflicts; CPU-us/renewal: %s, total %s, load generator %s; %.2f cores busy; raft leader: %s before, %s after",
		num(f.Result.Rate, 0), strings.Join(per, "+"), millis(f.Result.Latency.P50.Seconds()), millis(f.Result.Latency.P99.Seconds()),
		f.Result.Errors, f.Result.Conflicts, strings.Join(cpu, ", "), us(f.TotalPerRenewal()), us(f.LoadGenPerRenewal()),
		f.CoresBusy(), leaderText(f.Leader), leaderText(f.LeaderAfter))
}

func leaderText(k int) string {
	if k == 0 {
		return "unknown"
	}
	return fmt.Sprintf("server %d", k)
}

// millis is seconds in milliseconds.
func millis(seconds float64) float64 { return seconds * 1000 }

// CSVHeader and CSVRows are the raw data: one row per flood.
func (r *Result) CSVHeader() []string {
	h := []string{"cluster", "via", "round", "leader", "leader_after", "renewals_per_s", "p50_ms", "p99_ms", "errors", "conflicts"}
	for k := 1; k <= ServersOf(ClusterA); k++ {
		h = append(h, fmt.Sprintf("server%d_renewals_per_s", k), fmt.Sprintf("server%d_cpu_us_per_renewal", k), fmt.Sprintf("server%d_rss_mib", k))
	}
	return append(h, "servers_cpu_us_per_renewal", "loadgen_cpu_us_per_renewal", "cores_busy", "elapsed_s")
}

// CSVRows are the floods in the columns of CSVHeader.
func (r *Result) CSVRows() [][]string {
	var rows [][]string
	for _, f := range r.Floods {
		x := f.Result
		row := []string{f.Cluster, f.ViaText(), strconv.Itoa(f.Round), strconv.Itoa(f.Leader), strconv.Itoa(f.LeaderAfter),
			stats.CSVFloat(x.Rate), stats.CSVFloat(millis(x.Latency.P50.Seconds())), stats.CSVFloat(millis(x.Latency.P99.Seconds())),
			strconv.FormatInt(x.Errors, 10), strconv.FormatInt(x.Conflicts, 10)}
		for k := 1; k <= ServersOf(ClusterA); k++ {
			if k > len(f.Usage) {
				row = append(row, "", "", "")
				continue
			}
			row = append(row, stats.CSVFloat(f.Share(k)*x.Rate), stats.CSVFloat(f.CPUPerRenewal(k)*1e6), stats.CSVFloat(float64(f.Usage[k-1].RSS)/(1<<20)))
		}
		rows = append(rows, append(row, stats.CSVFloat(f.TotalPerRenewal()*1e6), stats.CSVFloat(f.LoadGenPerRenewal()*1e6),
			stats.CSVFloat(f.CoresBusy()), stats.CSVFloat(x.Elapsed.Seconds())))
	}
	return rows
}

// Markdown is the scenario's section of summary.md: the tables, what
// raft costs and what the figures predict.
func (r *Result) Markdown() string {
	var b strings.Builder
	l := r.Lease
	fmt.Fprintf(&b, "\n## Scale-out: the Lease flood through 1, 2 and 3 API servers (k1m build; median of rounds)\n\n")
	fmt.Fprintf(&b, "Cluster %q: three `k1m server`s, each in its own network namespace and memory cgroup (--memory-limit %s), each its own node; "+
		"the Leases live in the no-fsync etcd, one raft group across the three. Cluster %q: one `k1m server` (same limit), no raft peers. "+
		"%d Leases renewed by %d workers and followed by %d watchers, all spread round robin over the API servers named; %v warm-up + %v window. "+
		"CPU is each server's control plane (/proc/PID/stat of the `k1m server` process, which runs kube-apiserver, both etcds, the kubelet and kube-proxy, "+
		"and of its controller-manager and scheduler children; containerd and pods are left out), per renewal of the whole flood.\n\n",
		ClusterA, r.ServerMemory, ClusterB, l.Leases, l.Workers, l.Watchers, l.Warmup, l.Duration)
	r.writeTables(&b)
	s := r.Split()
	r.writeRaft(&b, s)
	b.WriteString(Prediction(s, r.Cores, r.measuredRates()))
	return b.String()
}

func (r *Result) writeTables(b *strings.Builder) {
	b.WriteString("| cluster | API servers | renewals/s | per API server | p50 ms | p99 ms | errors | conflicts | cores busy |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.rows() {
		rate := r.medianOf(c, func(f Flood) float64 { return f.Result.Rate })
		var per []string
		for _, k := range strings.Split(c.via, ",") {
			n, _ := strconv.Atoi(k)
			per = append(per, num(r.medianOf(c, func(f Flood) float64 { return f.Share(n) * f.Result.Rate }), 0))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", clusterText(c.cluster), c.via, num(rate, 0), strings.Join(per, " + "),
			num(r.medianOf(c, func(f Flood) float64 { return millis(f.Result.Latency.P50.Seconds()) }), 1),
			num(r.medianOf(c, func(f Flood) float64 { return millis(f.Result.Latency.P99.Seconds()) }), 1),
			num(r.medianOf(c, func(f Flood) float64 { return float64(f.Result.Errors) }), 0),
			num(r.medianOf(c, func(f Flood) float64 { return float64(f.Result.Conflicts) }), 0),
			num(r.medianOf(c, Flood.CoresBusy), 2))
	}
	b.WriteString("\nCPU-µs per renewal (each server's CPU over the window / every renewal of the flood; idle work included):\n\n")
	b.WriteString("| cluster | API servers | server 1 | server 2 | server 3 | servers total | load generator |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.rows() {
		fmt.Fprintf(b, "| %s | %s |", clusterText(c.cluster), c.via)
		for k := 1; k <= ServersOf(ClusterA); k++ {
			cell := "-"
			if k <= ServersOf(c.cluster) {
				cell = us(r.medianOf(c, func(f Flood) float64 { return f.CPUPerRenewal(k) }))
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		fmt.Fprintf(b, " %s | %s |\n", us(r.medianOf(c, Flood.TotalPerRenewal)), us(r.medianOf(c, Flood.LoadGenPerRenewal)))
	}
	b.WriteString("\nIdle, before the first flood (cores):")
	for _, ci := range r.Clusters {
		var cores []string
		for k, v := range ci.IdleCores {
			cores = append(cores, fmt.Sprintf("server %d %s", k+1, num(v, 3)))
		}
		fmt.Fprintf(b, " %s: %s;", clusterText(ci.Name), strings.Join(cores, ", "))
	}
	b.WriteString(" taken out of the figures below (idle rate x window).\n")
}

func (r *Result) writeRaft(b *strings.Builder, s Split) {
	b.WriteString("\n### What raft costs\n\n")
	fmt.Fprintf(b, "Flooded through server 1 alone, the three servers together spent %s CPU-µs per renewal; the lone server spent %s. "+
		"Three servers instead of one cost the difference, %s µs per renewal (x%s the lone server's): raft across three members for the Leases' store "+
		"and the two other kube-apiservers' watch caches. ",
		us(s.ThroughOne), us(s.Lone), us(s.Raft), num(s.ThroughOne/s.Lone, 2))
	fmt.Fprintf(b, "Each follower that served no renewal spent %s µs per renewal: its etcd member's raft follower work (append, apply to its store) "+
		"plus its own kube-apiserver's watch cache taking in every change (each kube-apiserver's cacher watches etcd whatever its clients do).\n",
		us(s.Followers))
}

// Prediction is the text that says what the figures predict per added
// core and machine, and how that was derived; measured are the
// renewals/s of cluster A through 1, 2 and 3 API servers.
func Prediction(s Split, cores int, measured []float64) string {
	var b strings.Builder
	c := float64(cores)
	var rates []string
	for _, m := range measured {
		rates = append(rates, num(m, 0))
	}
	b.WriteString("\n### What the figures predict (derived, not measured)\n\n")
	fmt.Fprintf(&b, "Here every server and the load generator share the machine's %d cores, so renewals/s through 1, 2 and 3 API servers (%s) "+
		"show this machine's limit, not the API servers'. What more cores and machines would carry is derived from where the CPU went:\n\n",
		cores, strings.Join(rates, ", "))
	fmt.Fprintf(&b, "In each flood of cluster %q, server k's cost c_k is its CPU over the window less its idle rate times the window, divided by every renewal of the flood, "+
		"and share_k is the fraction of the renewals that went through its API server. A least-squares fit of c_k = base_k + share_k x F over %d floods "+
		"(one base per server, one F for all; %d left out because the raft leader was another server or changed) gives:\n\n", ClusterA, s.Fitted, s.Left)
	fmt.Fprintf(&b, "- F = %s CPU-µs per renewal, the front end: what the API server a renewal goes through spends on it "+
		"(the request, admission, encoding, its local etcd member taking the write to the leader, the change sent to the watchers it holds);\n", us(s.FrontEnd))
	fmt.Fprintf(&b, "- base of the raft leader (server %d) = %s µs per renewal of the cluster, whoever served it: raft replication and apply, and its own watch cache;\n",
		s.Leader, us(s.LeaderBase))
	fmt.Fprintf(&b, "- base of a follower = %s µs (mean of the others): raft follower work and apply, and its own watch cache.\n\n", us(s.FollowerBase))
	fmt.Fprintf(&b, "Hence, on machines of C = %d cores like this one:\n\n", cores)
	fmt.Fprintf(&b, "- one more core of API server carries 1/F = %s renewals/s, while the raft leader has room;\n", num(capacity(1, s.FrontEnd), 0))
	fmt.Fprintf(&b, "- one raft group tops out at C / base_leader = %s renewals/s: its leader pays base_leader for every renewal of the cluster even when it serves none "+
		"(%s per core of the leader's machine, if etcd's work spread over every core; its apply loop is one goroutine, so expect less);\n",
		num(capacity(c, s.LeaderBase), 0), num(capacity(1, s.LeaderBase), 0))
	b.WriteString("- n servers, each an API server and a raft member, carry at most min(n x C / (F + base_leader + (n-1) x base_follower), C / base_leader, C / base_follower): " +
		"every renewal costs F once, base_leader at the leader and base_follower at every other server; so each added machine adds less, and none adds past the leader's ceiling. " +
		"One server is the lone server's measured cost, C / c_lone. Base figures were measured with two followers; with more members the leader sends each entry to each, " +
		"and an API-server-only server (--disable-etcd) pays its watch cache but no raft, so read the larger n as estimates.\n\n")
	b.WriteString("| servers | renewals/s (predicted) | added by the last server |\n|---|---|---|\n")
	prev := nan
	for n := 1; n <= 7; n++ {
		v := s.Renewals(n, c)
		added := "-"
		if n > 1 {
			added = num(v-prev, 0)
		}
		fmt.Fprintf(&b, "| %d | %s | %s |\n", n, num(v, 0), added)
		prev = v
	}
	return b.String()
}

// measuredRates are cluster A's median renewals/s through 1, 2 and 3
// API servers.
func (r *Result) measuredRates() []float64 {
	var out []float64
	for _, via := range Vias {
		out = append(out, r.medianOf(row{ClusterA, joinInts(via, ",")}, func(f Flood) float64 { return f.Result.Rate }))
	}
	return out
}
