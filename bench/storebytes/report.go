package storebytes

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/bench/stats"
)

// KindCSV is the kinds table: one row per store, kind and class.
func (r *Result) KindCSV() [][]string {
	rows := [][]string{{"store", "kind", "class", "count", "key_bytes", "value_bytes", "value_bytes_without_managed_fields", "mean_value_bytes", "max_value_bytes"}}
	for _, k := range r.Kinds {
		rows = append(rows, []string{k.Store, k.Kind, string(k.Class), strconv.Itoa(k.Count), i64(k.KeyBytes), i64(k.ValueBytes),
			i64(k.NoManagedFieldsBytes), stats.CSVFloat(per(k.ValueBytes, k.Count)), strconv.Itoa(k.MaxValueBytes)})
	}
	return rows
}

// StoreCSV is each store's file, revisions at rest and per-unit costs.
func (r *Result) StoreCSV() [][]string {
	rows := [][]string{{"store", "nodes", "pods", "quota_bytes", "idle_s", "revisions", "file_bytes_before", "in_use_bytes_before",
		"file_bytes_after_defrag", "per_node_bytes", "per_pod_bytes", "other_bytes", "history_per_node_bytes", "history_per_pod_bytes", "history_other_bytes", "overhead"}}
	for _, s := range r.Stores {
		c := r.Costs(s)
		f := stats.CSVFloat
		rows = append(rows, []string{s.Store, strconv.Itoa(r.Nodes), strconv.Itoa(r.Pods), i64(s.Quota), f(s.Idle.Seconds()), i64(s.Revisions),
			i64(s.Before.Size), i64(s.Before.InUse), i64(s.After.Size), f(c.PerNode), f(c.PerPod), f(c.Other), f(c.HistoryPerNode), f(c.HistoryPerPod), f(c.HistoryOther), f(c.Overhead)})
	}
	return rows
}

// WrittenCSV is what each store wrote at rest, by kind and class.
func (r *Result) WrittenCSV() [][]string {
	rows := [][]string{{"store", "kind", "class", "idle_s", "revisions", "key_bytes", "value_bytes"}}
	for _, s := range r.Stores {
		for _, k := range s.Written {
			rows = append(rows, []string{k.Store, k.Kind, string(k.Class), stats.CSVFloat(s.Idle.Seconds()), strconv.Itoa(k.Count), i64(k.KeyBytes), i64(k.ValueBytes)})
		}
	}
	return rows
}

// EstimateCSV is the sizing table.
func (r *Result) EstimateCSV() [][]string {
	rows := [][]string{{"store", "nodes", "pods", "live_bytes", "live_bytes_without_managed_fields", "history_bytes", "file_bytes", "quota_bytes", "fits", "max_nodes"}}
	for _, e := range r.Estimates() {
		rows = append(rows, []string{e.Store, strconv.Itoa(e.Nodes), strconv.Itoa(e.Pods), i64(e.Live), i64(e.NoManagedFields), i64(e.History),
			i64(e.File), i64(e.Quota), strconv.FormatBool(e.File <= e.Quota), strconv.Itoa(e.MaxNodes)})
	}
	return rows
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// Markdown is the scenario's part of the summary.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## The stores' bytes: %d real nodes, %d pods in Deployments of %d, each with a Service\n\n", r.Nodes, r.Pods, r.Config.PodsPerDeployment)
	b.WriteString("Read from etcd itself at one revision: keys and values as kube-apiserver stored them, the values again without ")
	b.WriteString("`metadata.managedFields`. Class: `node` objects are named after a node, `workload` ones are in the workload's namespace, ")
	b.WriteString("`other` is the rest (the cluster's own objects).\n\n")
	b.WriteString("| store | kind | class | count | mean value (B) | without managedFields (B) | max value (B) |\n|---|---|---|---|---|---|---|\n")
	for _, k := range r.Kinds {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.0f | %.0f | %d |\n", k.Store, k.Kind, k.Class, k.Count,
			per(k.ValueBytes, k.Count), per(k.NoManagedFieldsBytes, k.Count), k.MaxValueBytes)
	}
	fmt.Fprintf(&b, "\nWritten at rest over %v, by kind and class: the revisions kept until kube-apiserver's next compaction (every %v).\n\n", r.idle(), CompactionInterval)
	b.WriteString("| store | kind | class | revisions/s | bytes/s |\n|---|---|---|---|---|\n")
	for _, s := range r.Stores {
		for _, k := range s.Written {
			fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %.0f |\n", k.Store, k.Kind, k.Class, float64(k.Count)/s.Idle.Seconds(), float64(k.Bytes())/s.Idle.Seconds())
		}
	}
	b.WriteString("\nPer store: the file before compaction and after compacting to the newest revision and defragmenting; what a node, a pod and the rest hold (keys and values); ")
	b.WriteString("the history they write within a compaction interval at rest.\n\n")
	b.WriteString("| store | revisions/s at rest | file before (MiB) | in use before (MiB) | file after defrag (MiB) | per node (B) | per pod (B) | other (KiB) | history per node (B) | history per pod (B) | history other (KiB) | file / live |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Stores {
		c := r.Costs(s)
		fmt.Fprintf(&b, "| %s | %.2f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f |\n", s.Store, float64(s.Revisions)/s.Idle.Seconds(),
			mib(s.Before.Size), mib(s.Before.InUse), mib(s.After.Size), c.PerNode, c.PerPod, c.Other/1024, c.HistoryPerNode, c.HistoryPerPod, c.HistoryOther/1024, c.Overhead)
	}
	fmt.Fprintf(&b, "\nSizing, %d pods a node: the live bytes, without managedFields, the history kept between compactions, and the file: (live + history) x the measured file / live.\n\n", r.Config.SizingPodsPerNode)
	b.WriteString("| store | nodes | pods | live (GiB) | without managedFields (GiB) | history (GiB) | file (GiB) | quota (GiB) | fits | largest cluster that fits |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, e := range r.Estimates() {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.0f | %s | %d nodes |\n", e.Store, e.Nodes, e.Pods, gib(e.Live), gib(e.NoManagedFields),
			gib(e.History), gib(e.File), gib(e.Quota), yes(e.File <= e.Quota), e.MaxNodes)
	}
	return b.String()
}

// idle is the window the writes were counted over.
func (r *Result) idle() time.Duration {
	if len(r.Stores) == 0 {
		return 0
	}
	return r.Stores[0].Idle.Round(time.Second)
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }
func gib(v int64) float64 { return float64(v) / (1 << 30) }

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
