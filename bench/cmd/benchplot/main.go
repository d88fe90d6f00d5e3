// Command benchplot draws the PNG plots of a k1m-bench results folder from
// its CSV files. It is a module of its own so gonum/plot's dependencies
// stay out of the Kubernetes build's module graph.
package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchplot RESULTS-DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	plots := []struct {
		csv  string
		draw func(dir string, rows []map[string]string) error
	}{
		{"lease-flood.csv", leasePlots},
		{"etcd-flood.csv", etcdPlot},
		{"nodes.csv", nodePlots},
		{"watchcache.csv", watchCachePlot},
		{"joins.csv", joinsPlots},
		{"schedule.csv", schedulePlots},
		{"cluster.csv", clusterPlots},
		{"proxy.csv", proxyPlots},
		{"dns.csv", dnsPlots},
		{"metrics.csv", metricsPlots},
	}
	for _, p := range plots {
		rows, err := readCSV(filepath.Join(dir, p.csv))
		if os.IsNotExist(err) {
			continue
		}
		if err == nil {
			err = p.draw(dir, rows)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchplot: %s: %v\n", p.csv, err)
			os.Exit(1)
		}
	}
}

func readCSV(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil || len(records) == 0 {
		return nil, err
	}
	var rows []map[string]string
	for _, rec := range records[1:] {
		row := map[string]string{}
		for i, h := range records[0] {
			row[h] = rec[i]
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// medians groups rows by key (in first-seen order) and takes the median of col.
func medians(rows []map[string]string, key func(map[string]string) string, col string) ([]string, []float64) {
	var order []string
	vals := map[string][]float64{}
	for _, r := range rows {
		k := key(r)
		v, err := strconv.ParseFloat(r[col], 64)
		if err != nil {
			continue
		}
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = append(vals[k], v)
	}
	out := make([]float64, len(order))
	for i, k := range order {
		v := vals[k]
		sort.Float64s(v)
		if n := len(v); n%2 == 1 {
			out[i] = v[n/2]
		} else {
			out[i] = (v[n/2-1] + v[n/2]) / 2
		}
	}
	return order, out
}

func bars(dir, file, title, ylabel string, names []string, values []float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	b, err := plotter.NewBarChart(plotter.Values(values), vg.Points(40))
	if err != nil {
		return err
	}
	b.Color = color.RGBA{R: 50, G: 110, B: 190, A: 255}
	p.Add(b)
	p.NominalX(names...)
	return p.Save(vg.Length(110*len(names)+160), 4*vg.Inch, filepath.Join(dir, file))
}

// barChart is one bar chart of a CSV column's medians per key.
type barChart struct{ col, file, title, unit string }

// column is a row's value in column name, as a bar's key.
func column(name string) func(map[string]string) string {
	return func(r map[string]string) string { return r[name] }
}

// medianBars draws each chart of rows, one bar per key (median of rounds).
func medianBars(dir string, rows []map[string]string, key func(map[string]string) string, charts ...barChart) error {
	for _, c := range charts {
		names, vals := medians(rows, key, c.col)
		if err := bars(dir, c.file, c.title, c.unit, names, vals); err != nil {
			return err
		}
	}
	return nil
}

func leasePlots(dir string, rows []map[string]string) error {
	return medianBars(dir, rows, column("variant"),
		barChart{"updates_per_s", "lease-flood-rate.png", "Lease flood through kube-apiserver: throughput", "Lease updates/s"},
		barChart{"p99_ms", "lease-flood-p99.png", "Lease flood: p99 update latency", "ms"},
		barChart{"apiserver_cpu_us_per_update", "lease-flood-cpu.png", "Lease flood: kube-apiserver CPU per update", "CPU-us/update"})
}

// joinsPlots draws the joins scenario: joins/s and p99 time to the
// certificate, per build.
func joinsPlots(dir string, rows []map[string]string) error {
	return medianBars(dir, rows, column("flavour"),
		barChart{"joins_per_s", "joins-rate.png", "Simulated joins: certificates issued per second", "joins/s"},
		barChart{"p99_ms", "joins-p99.png", "Simulated joins: p99 from request to certificate", "ms"})
}

// schedulePlots draws the schedule scenario: pods bound per second and
// the scheduler's CPU per pod, per build and node count.
func schedulePlots(dir string, rows []map[string]string) error {
	key := func(r map[string]string) string { return r["flavour"] + " " + r["nodes"] }
	return medianBars(dir, rows, key,
		barChart{"pods_per_s", "schedule-rate.png", "Scheduler: pods bound per second (build, nodes)", "pods/s"},
		barChart{"scheduler_cpu_us_per_pod", "schedule-cpu.png", "Scheduler: CPU per pod (build, nodes)", "CPU-us/pod"})
}

// clusterPlots draws the cluster scenario per build and node count: pod
// startup p99 (SLO 5 s), the watch events kube-apiserver sent, and the
// server's CPU.
func clusterPlots(dir string, rows []map[string]string) error {
	key := func(r map[string]string) string { return r["flavour"] + " " + r["nodes"] }
	return medianBars(dir, rows, key,
		barChart{"pod_startup_p99_ms", "cluster-startup.png", "Whole cluster: pod startup p99 (build, nodes)", "ms; SLO 5000 ms"},
		barChart{"watch_events_per_s", "cluster-watch-events.png", "Whole cluster: watch events sent per second (build, nodes)", "events/s"},
		barChart{"control_plane_cores", "cluster-cpu.png", "Whole cluster: the server's CPU (build, nodes)", "cores"})
}

// proxyPlots draws the proxy scenario per mode and Service count: the
// network programming p99 and kube-proxy's CPU per change.
func proxyPlots(dir string, rows []map[string]string) error {
	key := func(r map[string]string) string { return r["mode"] + " " + r["services"] }
	return medianBars(dir, rows, key,
		barChart{"programming_p99_ms", "proxy-programming.png", "kube-proxy: network programming p99 (mode, Services)", "ms"},
		barChart{"proxy_cpu_ms_per_change", "proxy-cpu.png", "kube-proxy: CPU per EndpointSlice change (mode, Services)", "CPU-ms/change"})
}

// dnsPlots draws the dns scenario per offered rate: the answers' p99 and
// CoreDNS's CPU per query.
func dnsPlots(dir string, rows []map[string]string) error {
	key := func(r map[string]string) string { return r["offered_per_s"] + "/s" }
	return medianBars(dir, rows, key,
		barChart{"latency_p99_us", "dns-p99.png", "One CoreDNS replica: answer p99 (offered queries/s)", "us"},
		barChart{"coredns_cpu_us_per_query", "dns-cpu.png", "One CoreDNS replica: CPU per query (offered queries/s)", "CPU-us/query"})
}

// metricsPlots draws the metrics scenario per node count: metrics-server's
// CPU per scrape, its cores and its resident memory.
func metricsPlots(dir string, rows []map[string]string) error {
	key := func(r map[string]string) string { return r["nodes"] + " nodes" }
	return medianBars(dir, rows, key,
		barChart{"cpu_us_per_scrape", "metrics-cpu.png", "metrics-server: CPU per node scraped (nodes)", "CPU-us/scrape"},
		barChart{"metrics_server_cores", "metrics-cores.png", "metrics-server: cores, one scrape a node every 15 s (nodes)", "cores"},
		barChart{"rss_mib", "metrics-rss.png", "metrics-server: resident memory (nodes)", "MiB"})
}

func etcdPlot(dir string, rows []map[string]string) error {
	names, vals := medians(rows, func(r map[string]string) string { return r["mode"] }, "puts_per_s")
	return bars(dir, "etcd-flood.png", "Lease-sized puts straight to etcd", "puts/s", names, vals)
}

// nodePlots draws the node ramp: mutating-call p99 and the control
// plane's cores against nodes, one line per column (build and interval).
func nodePlots(dir string, rows []map[string]string) error {
	if err := nodeLines(dir, rows, "mutating_p99_ms", "Node heartbeats: mutating-call p99", "p99 (ms); SLO 1000 ms", "nodes-p99.png"); err != nil {
		return err
	}
	return nodeLines(dir, rows, "control_plane_cores", "Node heartbeats: control-plane CPU (simulator apart)", "cores", "nodes-cpu.png")
}

func nodeLines(dir string, rows []map[string]string, column, title, label, file string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = label
	var order []string
	series := map[string]plotter.XYs{}
	for _, r := range rows {
		n, err1 := strconv.ParseFloat(r["nodes"], 64)
		v, err2 := strconv.ParseFloat(r[column], 64)
		if err1 != nil || err2 != nil || math.IsNaN(v) {
			continue
		}
		if _, ok := series[r["column"]]; !ok {
			order = append(order, r["column"])
		}
		series[r["column"]] = append(series[r["column"]], plotter.XY{X: n, Y: v})
	}
	var args []interface{}
	for _, name := range order {
		args = append(args, name, series[name])
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, file))
}

func watchCachePlot(dir string, rows []map[string]string) error {
	key := func(r map[string]string) string { return r["objects"] + " " + r["op"] }
	split := func(store string) ([]string, []float64) {
		var mine []map[string]string
		for _, r := range rows {
			if r["store"] == store {
				mine = append(mine, r)
			}
		}
		return medians(mine, key, "ns_per_op")
	}
	names, hashmap := split("hashmap")
	btreeNames, btree := split("btree")
	if len(names) != len(btreeNames) {
		return fmt.Errorf("hashmap and btree results do not pair up: %v vs %v", names, btreeNames)
	}
	ratios := make([]float64, len(names))
	for i := range names {
		ratios[i] = hashmap[i] / btree[i]
	}
	return bars(dir, "watchcache.png", "Watch cache: hashmap time / B-tree time (below 1: hashmap faster)", "ratio", names, ratios)
}
