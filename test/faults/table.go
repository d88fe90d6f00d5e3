package faults

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Table renders results as a Markdown table: the scenario, writes
// acknowledged and missing, the longest stall of every writer together,
// the seconds each node was seen NotReady, the time to converge after the
// heal, and the invariants that failed.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | acknowledged | missing | longest write stall | NotReady seconds | time to converge | failed invariants |\n")
	b.WriteString("|---|---:|---:|---:|---|---:|---|\n")
	for _, r := range results {
		failed := "none"
		if !r.Passed() {
			failed = strings.Join(r.Failed, "; ")
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s |\n", r.Scenario, r.Acked, r.Missing, seconds(r.Stall), notReady(r.NotReady), converge(r.Converge), failed)
	}
	return b.String()
}

// Stamp heads a table with the tree it ran on (a commit, "-dirty" with
// changes not committed), how long the campaign took and its command
// (with the store partitions it ran with, if any). It
// names no date: docs/ha.md is a reference page, and the commit dates
// the run.
func Stamp(commit string, took time.Duration, scenarios, repeat, partitions, table string) string {
	command := fmt.Sprintf("make faults SCENARIOS=%s REPEAT=%s", scenarios, repeat)
	if partitions != "" {
		command += " PARTITIONS=" + partitions
	}
	return fmt.Sprintf("Run on the tree of commit %s, %s in all (`%s`):\n\n%s", commit, took.Round(time.Second), command, table)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func converge(d time.Duration) string {
	if d < 0 {
		return "not within " + convergeTimeout.String()
	}
	return fmt.Sprintf("%d s", int(d.Seconds()))
}

// notReady lists node: seconds, by node name; "none" when every node
// stayed Ready.
func notReady(seconds map[string]int) string {
	if len(seconds) == 0 {
		return "none"
	}
	var nodes []string
	for n := range seconds {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var parts []string
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s: %d", n, seconds[n]))
	}
	return strings.Join(parts, ", ")
}

// Evidence is every failed run's evidence, a list item per line.
func Evidence(results []Result) string {
	var b strings.Builder
	for _, r := range results {
		for _, e := range r.Evidence {
			fmt.Fprintf(&b, "- %s: %s\n", r.Scenario, e)
		}
	}
	return b.String()
}

// The markers around the table in docs/ha.md.
const (
	tableBegin = "<!-- faults-table: written by make faults FAULTS_DOCS=1 -->"
	tableEnd   = "<!-- /faults-table -->"
)

// ReplaceTable puts table (with a line saying when and how it ran)
// between the markers of doc.
func ReplaceTable(doc, table string) (string, error) {
	begin := strings.Index(doc, tableBegin)
	end := strings.Index(doc, tableEnd)
	if begin < 0 || end < begin {
		return "", fmt.Errorf("no %q ... %q markers in order", tableBegin, tableEnd)
	}
	return doc[:begin+len(tableBegin)] + "\n" + table + doc[end:], nil
}

// UpdateDoc rewrites the table in the Markdown file at path.
func UpdateDoc(path, table string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc, err := ReplaceTable(string(data), table)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
