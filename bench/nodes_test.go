package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/bench/noderamp"
)

func TestNodeCSVRowsMatchTheHeader(t *testing.T) {
	rep := &Report{Nodes: []NodeColumn{{Name: "k1m-10s", Variant: K1m, Renew: 10 * time.Second, SimulatorCores: 0.6,
		Result: noderamp.Result{Steps: []noderamp.Step{{Held: true, Reading: noderamp.Reading{Nodes: 1000}}}}}}}
	rows := rep.nodeCSV()
	if len(rows) != 3 {
		t.Fatalf("%d rows, want the header, the idle reading and one step", len(rows))
	}
	for i, r := range rows {
		if len(r) != len(nodeCSVHeader) {
			t.Errorf("row %d has %d fields, the header %d", i, len(r), len(nodeCSVHeader))
		}
	}
	if got := strings.Join(rows[2][:6], ","); got != "k1m-10s,k1m,10,1000,true," {
		t.Errorf("step row starts %q", got)
	}
}

func TestNodeMarkdownRow(t *testing.T) {
	res := noderamp.Result{MaxHeld: 6000, CPUSecondsPer1000NodesMinute: 7.125, MarginalCPUSecondsPer1000NodesMinute: 6.5,
		NodesPerCore: 8421.05, MarginalNodesPerCore: 9230.8, APIServerHeapPerNode: 45000.4, EtcdHeapPerNode: 5000,
		Steps: []noderamp.Step{
			{Held: true, Reading: noderamp.Reading{Nodes: 6000, Simulator: noderamp.SimulatorReading{Cores: 0.19}}},
			{Reason: "mutating p99 1.2 s > 1s", Reading: noderamp.Reading{Nodes: 12000}},
		}}
	wantNodeRow(t, res, "| k1m-10s | 6000 | 12000: mutating p99 1.2 s > 1s | 7.12 / 6.50 | 8421 / 9231 | 45000 / 5000 | 0.19 |\n")
	if math.IsNaN(perThousandNodesMinute(time.Minute, time.Minute, 1000)) || perThousandNodesMinute(time.Minute, time.Minute, 1000) != 60 {
		t.Errorf("perThousandNodesMinute(1 min CPU, 1 min, 1000 nodes) = %g, want 60", perThousandNodesMinute(time.Minute, time.Minute, 1000))
	}
}

func TestNodeMarkdownShowsWhatCouldNotBeComputed(t *testing.T) {
	res := noderamp.Result{MaxHeld: 4000, CPUSecondsPer1000NodesMinute: 9.55, MarginalCPUSecondsPer1000NodesMinute: math.NaN(),
		NodesPerCore: 6283, MarginalNodesPerCore: math.NaN(), APIServerHeapPerNode: 27598, EtcdHeapPerNode: 8153,
		Steps: []noderamp.Step{{Held: true, Reading: noderamp.Reading{Nodes: 4000, Simulator: noderamp.SimulatorReading{Cores: 0.17}}}}}
	wantNodeRow(t, res, "| k1m-10s | 4000 | (every step held) | 9.55 / - | 6283 / - | 27598 / 8153 | 0.17 |\n")
}

// wantNodeRow renders the node summary of one column, k1m-10s with the
// simulator capped at 0.6 cores, and wants want among its rows.
func wantNodeRow(t *testing.T, res noderamp.Result, want string) {
	t.Helper()
	rep := &Report{Nodes: []NodeColumn{{Name: "k1m-10s", SimulatorCores: 0.6, Result: res}}}
	var b strings.Builder
	rep.nodeMarkdown(&b)
	if !strings.Contains(b.String(), want) {
		t.Errorf("summary\n%s\nhas no row\n%s", b.String(), want)
	}
}
