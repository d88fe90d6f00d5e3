package bench

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/dnsload"
	"k1m.dev/k1m/bench/etcdflood"
	"k1m.dev/k1m/bench/joins"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/metricsload"
	"k1m.dev/k1m/bench/proxymode"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/bench/schedule"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/bench/storebytes"
	"k1m.dev/k1m/bench/watchcache"
)

// Report is everything a run measured.
type Report struct {
	Dir               string `json:"-"`
	Machine           Machine
	Started, Finished time.Time
	Lease             []LeaseRow
	Etcd              []EtcdRow
	Nodes             []NodeColumn
	WatchCache        []watchcache.Result
	ScaleOut          *scaleout.Result    `json:",omitempty"`
	Deployed          *deployed.Result    `json:",omitempty"`
	Joins             *joins.Result       `json:",omitempty"`
	Schedule          *schedule.Result    `json:",omitempty"`
	Cluster           *clusterload.Result `json:",omitempty"`
	Proxy             *proxymode.Result   `json:",omitempty"`
	DNS               *dnsload.Result     `json:",omitempty"`
	Store             *storebytes.Result  `json:",omitempty"`
	Metrics           *metricsload.Result `json:",omitempty"`
}

// Machine is what the figures were measured on.
type Machine struct {
	Cores     int
	MemoryGiB float64
	Kernel    string
	Go        string
	Commit    string
	// FsyncP50us is the median time of a 4 KiB write + fsync in the results
	// folder: what a durable etcd commit pays on this disk at least.
	FsyncP50us float64
}

// DescribeMachine reads this machine's description; dir is where the
// benchmark's etcd data lives (for the fsync figure).
func DescribeMachine(dir string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if total, err := memTotal(); err == nil {
		m.MemoryGiB = math.Round(float64(total)/(1<<30)*10) / 10
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(b))
	}
	if d, err := fsyncLatency(dir, 200); err == nil {
		m.FsyncP50us = float64(d) / float64(time.Microsecond)
	}
	return m
}

// fsyncLatency is the median of n (4 KiB write, fsync) pairs in dir.
func fsyncLatency(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	samples := make([]time.Duration, n)
	for i := range samples {
		start := time.Now()
		if _, err := f.WriteAt(block, int64(i%64)*4096); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		samples[i] = time.Since(start)
	}
	return stats.Percentile(samples, 50), nil
}

// LeaseRow is one lease flood.
type LeaseRow struct {
	Variant  string
	Round    int
	Result   leaseflood.Result
	Profiles []ProcessCPUProfile `json:",omitempty"` // with --cpu-profiles
}

func (r LeaseRow) metrics() map[string]float64 {
	x := r.Result
	per := func(d time.Duration) float64 {
		if x.Updates == 0 {
			return math.NaN()
		}
		return float64(d.Microseconds()) / float64(x.Updates)
	}
	return map[string]float64{
		"updates_per_s":               x.Rate,
		"p50_ms":                      ms(x.Latency.P50),
		"p99_ms":                      ms(x.Latency.P99),
		"apiserver_cpu_us_per_update": per(x.APIServer.CPU),
		"etcd_cpu_us_per_update":      per(x.Etcd.CPU),
		"apiserver_peak_rss_mib":      float64(x.APIServer.PeakRSS) / (1 << 20),
		"apiserver_gc_cpu_share":      share(x.APIServer.GCCPU, x.APIServer.CPU),
		"watch_events_per_s":          x.WatchEventRate,
		"errors":                      float64(x.Errors),
		"conflicts":                   float64(x.Conflicts),
	}
}

var leaseColumns = []string{"updates_per_s", "p50_ms", "p99_ms", "apiserver_cpu_us_per_update", "etcd_cpu_us_per_update",
	"apiserver_peak_rss_mib", "apiserver_gc_cpu_share", "watch_events_per_s", "errors", "conflicts"}

// Line is the progress line of a row.
func (r LeaseRow) Line() string {
	m := r.metrics()
	return fmt.Sprintf("%.0f updates/s, p50 %.1f ms, p99 %.1f ms, apiserver %.0f CPU-us/update (GC %.0f%%), peak RSS %.0f MiB, %d errors",
		m["updates_per_s"], m["p50_ms"], m["p99_ms"], m["apiserver_cpu_us_per_update"], 100*m["apiserver_gc_cpu_share"], m["apiserver_peak_rss_mib"], r.Result.Errors)
}

// EtcdRow is one etcd flood.
type EtcdRow struct {
	Mode   string
	Round  int
	Result etcdflood.Result
}

func (r EtcdRow) metrics() map[string]float64 {
	x := r.Result
	cpu := math.NaN()
	if x.Puts > 0 {
		cpu = float64(x.Etcd.CPU.Microseconds()) / float64(x.Puts)
	}
	return map[string]float64{"puts_per_s": x.Rate, "p50_ms": ms(x.Latency.P50), "p99_ms": ms(x.Latency.P99),
		"etcd_cpu_us_per_put": cpu, "value_bytes": float64(x.ValueBytes), "errors": float64(x.Errors)}
}

var etcdColumns = []string{"puts_per_s", "p50_ms", "p99_ms", "etcd_cpu_us_per_put", "value_bytes", "errors"}

// Line is the progress line of a row.
func (r EtcdRow) Line() string {
	m := r.metrics()
	return fmt.Sprintf("%.0f puts/s, p50 %.2f ms, p99 %.2f ms, %.0f CPU-us/put, %.0f-byte values, %d errors",
		m["puts_per_s"], m["p50_ms"], m["p99_ms"], m["etcd_cpu_us_per_put"], m["value_bytes"], r.Result.Errors)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func share(part, whole time.Duration) float64 {
	if whole <= 0 {
		return math.NaN()
	}
	return float64(part) / float64(whole)
}

// Write writes the data files and the plots, and prints the summary.
func (rep *Report) Write(benchplot string, progress io.Writer) error {
	if err := rep.writeData(); err != nil {
		return err
	}
	fmt.Fprint(progress, "\n"+rep.Summary())
	if err := Plot(benchplot, rep.Dir, progress); err != nil {
		return err
	}
	fmt.Fprintf(progress, "\nresults: %s (CSV, report.json, summary.md, *.png)\n", rep.Dir)
	return nil
}

// writeData writes the CSV files, report.json and summary.md.
func (rep *Report) writeData() error {
	if err := rep.writeCSVs(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(rep.Dir, "report.json"), data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(rep.Dir, "summary.md"), []byte(rep.Summary()), 0o644)
}

func (rep *Report) writeCSVs() error {
	if len(rep.Lease) > 0 {
		rows := [][]string{append([]string{"variant", "round"}, leaseColumns...)}
		for _, r := range rep.Lease {
			rows = append(rows, csvRow([]string{r.Variant, strconv.Itoa(r.Round)}, r.metrics(), leaseColumns))
		}
		if err := writeCSV(filepath.Join(rep.Dir, "lease-flood.csv"), rows); err != nil {
			return err
		}
	}
	if rep.cpuProfiled() {
		if err := writeCSV(filepath.Join(rep.Dir, "cpu-profile.csv"), rep.cpuProfileCSV()); err != nil {
			return err
		}
	}
	if len(rep.Etcd) > 0 {
		rows := [][]string{append([]string{"mode", "round"}, etcdColumns...)}
		for _, r := range rep.Etcd {
			rows = append(rows, csvRow([]string{r.Mode, strconv.Itoa(r.Round)}, r.metrics(), etcdColumns))
		}
		if err := writeCSV(filepath.Join(rep.Dir, "etcd-flood.csv"), rows); err != nil {
			return err
		}
	}
	if len(rep.Nodes) > 0 {
		if err := writeCSV(filepath.Join(rep.Dir, "nodes.csv"), rep.nodeCSV()); err != nil {
			return err
		}
		if err := writeCSV(filepath.Join(rep.Dir, "nodes-profile.csv"), rep.nodeCPUProfileCSV()); err != nil {
			return err
		}
	}
	if len(rep.WatchCache) > 0 {
		rows := [][]string{{"store", "objects", "op", "iterations", "ns_per_op", "bytes_per_op", "allocs_per_op"}}
		for _, r := range rep.WatchCache {
			rows = append(rows, []string{r.Store, strconv.Itoa(r.Objects), r.Op, strconv.Itoa(r.Iterations), stats.CSVFloat(r.NsPerOp), stats.CSVFloat(r.BytesPerOp), stats.CSVFloat(r.AllocsPerOp)})
		}
		if err := writeCSV(filepath.Join(rep.Dir, "watchcache.csv"), rows); err != nil {
			return err
		}
	}
	if rep.ScaleOut != nil && len(rep.ScaleOut.Floods) > 0 {
		rows := append([][]string{rep.ScaleOut.CSVHeader()}, rep.ScaleOut.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "scaleout.csv"), rows); err != nil {
			return err
		}
	}
	if rep.Deployed != nil && len(rep.Deployed.Floods) > 0 {
		rows := append([][]string{rep.Deployed.CSVHeader()}, rep.Deployed.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "deployed.csv"), rows); err != nil {
			return err
		}
		rows = append([][]string{rep.Deployed.ProfileCSVHeader()}, rep.Deployed.ProfileCSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "deployed-profile.csv"), rows); err != nil {
			return err
		}
	}
	if rep.Joins != nil && len(rep.Joins.Trials) > 0 {
		rows := append([][]string{rep.Joins.CSVHeader()}, rep.Joins.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "joins.csv"), rows); err != nil {
			return err
		}
	}
	if rep.Schedule != nil && len(rep.Schedule.Steps) > 0 {
		rows := append([][]string{rep.Schedule.CSVHeader()}, rep.Schedule.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "schedule.csv"), rows); err != nil {
			return err
		}
	}
	if rep.Cluster != nil && len(rep.Cluster.Steps) > 0 {
		rows := append([][]string{rep.Cluster.CSVHeader()}, rep.Cluster.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "cluster.csv"), rows); err != nil {
			return err
		}
		if err := writeCSV(filepath.Join(rep.Dir, "cluster-processes.csv"), rep.Cluster.ProcessCSV()); err != nil {
			return err
		}
		if err := writeCSV(filepath.Join(rep.Dir, "cluster-queues.csv"), rep.Cluster.QueueCSV()); err != nil {
			return err
		}
		if storms := rep.Cluster.StormCSV(); len(storms) > 1 {
			if err := writeCSV(filepath.Join(rep.Dir, "cluster-storm.csv"), storms); err != nil {
				return err
			}
		}
		if rolling := rep.Cluster.RollingCSV(); len(rolling) > 1 {
			if err := writeCSV(filepath.Join(rep.Dir, "cluster-rolling.csv"), rolling); err != nil {
				return err
			}
		}
	}
	if rep.Proxy != nil && len(rep.Proxy.Steps) > 0 {
		rows := append([][]string{rep.Proxy.CSVHeader()}, rep.Proxy.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "proxy.csv"), rows); err != nil {
			return err
		}
	}
	if rep.DNS != nil && len(rep.DNS.Steps) > 0 {
		rows := append([][]string{rep.DNS.CSVHeader()}, rep.DNS.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "dns.csv"), rows); err != nil {
			return err
		}
	}
	if rep.Metrics != nil && len(rep.Metrics.Steps) > 0 {
		rows := append([][]string{rep.Metrics.CSVHeader()}, rep.Metrics.CSVRows()...)
		if err := writeCSV(filepath.Join(rep.Dir, "metrics.csv"), rows); err != nil {
			return err
		}
	}
	if rep.Store != nil {
		for name, rows := range map[string][][]string{"store-kinds.csv": rep.Store.KindCSV(), "store-files.csv": rep.Store.StoreCSV(),
			"store-written.csv": rep.Store.WrittenCSV(), "store-sizing.csv": rep.Store.EstimateCSV()} {
			if err := writeCSV(filepath.Join(rep.Dir, name), rows); err != nil {
				return err
			}
		}
	}
	return nil
}

func csvRow(prefix []string, m map[string]float64, cols []string) []string {
	for _, c := range cols {
		prefix = append(prefix, stats.CSVFloat(m[c]))
	}
	return prefix
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// medianOf is the median of metric over the rows of one key.
func medianOf[R any](rows []R, key func(R) string, want string, metric func(R) float64) float64 {
	var vals []float64
	for _, r := range rows {
		if key(r) == want {
			if v := metric(r); !math.IsNaN(v) {
				vals = append(vals, v)
			}
		}
	}
	if len(vals) == 0 {
		return math.NaN()
	}
	return stats.Median(vals)
}

// Summary is the markdown table of medians and ratios against stock.
func (rep *Report) Summary() string {
	var b strings.Builder
	m := rep.Machine
	fmt.Fprintf(&b, "# k1m benchmark summary\n\nmachine: %d cores, %.1f GiB, Linux %s, %s, 4 KiB write+fsync p50 %.0f us, commit %s; %s to %s\n",
		m.Cores, m.MemoryGiB, m.Kernel, m.Go, m.FsyncP50us, m.Commit, rep.Started.Format(time.RFC3339), rep.Finished.Format(time.RFC3339))
	if len(rep.Lease) > 0 {
		b.WriteString("\n## Lease flood through kube-apiserver (median of rounds; ratio = variant / stock)\n\n")
		variants := uniq(rep.Lease, func(r LeaseRow) string { return r.Variant })
		cols := []string{"updates_per_s", "p50_ms", "p99_ms", "apiserver_cpu_us_per_update", "etcd_cpu_us_per_update", "apiserver_peak_rss_mib", "apiserver_gc_cpu_share", "watch_events_per_s"}
		tableHeader(&b, "variant", cols)
		for _, v := range variants {
			fmt.Fprintf(&b, "| %s |", v)
			for _, c := range cols {
				val := medianOf(rep.Lease, func(r LeaseRow) string { return r.Variant }, v, func(r LeaseRow) float64 { return r.metrics()[c] })
				base := medianOf(rep.Lease, func(r LeaseRow) string { return r.Variant }, Stock, func(r LeaseRow) float64 { return r.metrics()[c] })
				fmt.Fprintf(&b, " %s |", cell(val, base, v == Stock))
			}
			b.WriteString("\n")
		}
	}
	if rep.cpuProfiled() {
		rep.cpuProfileMarkdown(&b)
	}
	if len(rep.Etcd) > 0 {
		b.WriteString("\n## Lease flood straight to etcd (median of rounds; ratio = no-fsync / fsync)\n\n")
		tableHeader(&b, "etcd", etcdColumns[:4])
		for _, mode := range uniq(rep.Etcd, func(r EtcdRow) string { return r.Mode }) {
			fmt.Fprintf(&b, "| %s |", mode)
			for _, c := range etcdColumns[:4] {
				val := medianOf(rep.Etcd, func(r EtcdRow) string { return r.Mode }, mode, func(r EtcdRow) float64 { return r.metrics()[c] })
				base := medianOf(rep.Etcd, func(r EtcdRow) string { return r.Mode }, "fsync", func(r EtcdRow) float64 { return r.metrics()[c] })
				fmt.Fprintf(&b, " %s |", cell(val, base, mode == "fsync"))
			}
			b.WriteString("\n")
		}
	}
	rep.nodeMarkdown(&b)
	if len(rep.WatchCache) > 0 {
		b.WriteString("\n## Watch cache stores (ns/op, median of counts; ratio = hashmap / btree, below 1 is faster)\n\n")
		b.WriteString("| objects | op | hashmap ns/op | btree ns/op | ratio |\n|---|---|---|---|---|\n")
		key := func(r watchcache.Result) string { return fmt.Sprintf("%s/%d/%s", r.Store, r.Objects, r.Op) }
		seen := map[string]bool{}
		for _, r := range rep.WatchCache {
			k := fmt.Sprintf("%d/%s", r.Objects, r.Op)
			if seen[k] {
				continue
			}
			seen[k] = true
			ns := func(r watchcache.Result) float64 { return r.NsPerOp }
			h := medianOf(rep.WatchCache, key, "hashmap/"+k, ns)
			t := medianOf(rep.WatchCache, key, "btree/"+k, ns)
			fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %s |\n", r.Objects, r.Op, h, t, ratioText(stats.Ratio(h, t)))
		}
	}
	if rep.ScaleOut != nil && len(rep.ScaleOut.Floods) > 0 {
		b.WriteString(rep.ScaleOut.Markdown())
	}
	if rep.Deployed != nil && len(rep.Deployed.Floods) > 0 {
		b.WriteString(rep.Deployed.Markdown())
	}
	if rep.Joins != nil && len(rep.Joins.Trials) > 0 {
		b.WriteString(rep.Joins.Markdown())
	}
	if rep.Schedule != nil && len(rep.Schedule.Steps) > 0 {
		b.WriteString(rep.Schedule.Markdown())
	}
	if rep.Cluster != nil && len(rep.Cluster.Steps) > 0 {
		b.WriteString(rep.Cluster.Markdown())
	}
	if rep.Proxy != nil && len(rep.Proxy.Steps) > 0 {
		b.WriteString(rep.Proxy.Markdown())
	}
	if rep.DNS != nil && len(rep.DNS.Steps) > 0 {
		b.WriteString(rep.DNS.Markdown())
	}
	if rep.Store != nil && len(rep.Store.Stores) > 0 {
		b.WriteString(rep.Store.Markdown())
	}
	if rep.Metrics != nil && len(rep.Metrics.Steps) > 0 {
		b.WriteString(rep.Metrics.Markdown())
	}
	return b.String()
}

func uniq[R any](rows []R, key func(R) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		if k := key(r); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// rank puts the baseline first and k1m second in tables.
func rank(name string) int {
	switch name {
	case Stock, "fsync":
		return 0
	case K1m, "no-fsync":
		return 1
	}
	return 2
}

func tableHeader(b *strings.Builder, first string, cols []string) {
	fmt.Fprintf(b, "| %s | %s |\n|%s\n", first, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)+1))
}

func cell(val, base float64, isBase bool) string {
	if math.IsNaN(val) {
		return "n/a"
	}
	v := strconv.FormatFloat(val, 'g', 4, 64)
	if isBase {
		return v
	}
	return v + " (" + ratioText(stats.Ratio(val, base)) + ")"
}

func ratioText(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("x%.2f", r)
}

// lineProgress passes only benchmark result lines to w; Close waits
// until every line written has been passed on.
func lineProgress(w io.Writer) io.WriteCloser {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), watchcache.Benchmark) {
				fmt.Fprintln(w, "  "+sc.Text())
			}
		}
		io.Copy(io.Discard, pr)
	}()
	return &progressPipe{pw, done}
}

type progressPipe struct {
	*io.PipeWriter
	done chan struct{}
}

func (p *progressPipe) Close() error {
	err := p.PipeWriter.Close()
	<-p.done
	return err
}
