package noderamp

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/cgroups"
)

func TestJudge(t *testing.T) {
	held := Step{Reading: Reading{Nodes: 10000, MutatingP99: 0.2, LeaseWriteRate: 995, Window: 10 * time.Second,
		Simulator: SimulatorReading{Renewals: 9950}}}
	for _, tc := range []struct {
		name   string
		mutate func(*Step)
		reason string
	}{
		{"held", func(*Step) {}, ""},
		{"slow", func(s *Step) { s.MutatingP99 = 1.5 }, "mutating p99 1500.0ms > 1s"},
		{"no calls", func(s *Step) { s.MutatingP99 = math.NaN() }, "no mutating calls measured"},
		{"not ready", func(s *Step) { s.NotReady = 3 }, "3 nodes NotReady"},
		{"simulator capped", func(s *Step) { s.Simulator.Renewals, s.Simulator.ThrottledShare = 7000, 0.8 },
			"renewals not delivered: 700 of 1000 renewals/s, the simulator throttled in 80% of periods (raise --simulator-cpu)"},
		{"server the limit", func(s *Step) { s.Simulator.Renewals, s.Simulator.ThrottledShare = 7000, 0.1 },
			"renewals not delivered: 700 of 1000 renewals/s, the simulator not at its cap (the server is the limit)"},
		// The server's count includes failures and retries: only the
		// simulator's successes count as delivered.
		{"failed writes counted by the server", func(s *Step) { s.LeaseWriteRate, s.Simulator.Renewals = 1200, 7000 },
			"renewals not delivered: 700 of 1000 renewals/s, the simulator not at its cap (the server is the limit)"},
	} {
		s := held
		tc.mutate(&s)
		judge(&s, time.Second, 10*time.Second)
		if s.Held != (tc.reason == "") || s.Reason != tc.reason {
			t.Errorf("%s: held %v, reason %q; want reason %q", tc.name, s.Held, s.Reason, tc.reason)
		}
	}
}

func TestFitUsesTheIdleReadingAndTheStepsHeld(t *testing.T) {
	res := Result{
		Idle: Reading{APIServerCores: 0.1, APIServerHeap: 100 << 20, EtcdHeap: 10 << 20},
		Steps: []Step{
			{Held: true, Reading: Reading{Nodes: 1000, APIServerCores: 0.2, EtcdCores: 0.1, APIServerHeap: 110 << 20, EtcdHeap: 11 << 20}},
			{Held: true, Reading: Reading{Nodes: 2000, APIServerCores: 0.35, EtcdCores: 0.15, ControllerCores: 0.0, APIServerHeap: 120 << 20, EtcdHeap: 12 << 20}},
			{Held: false, Reading: Reading{Nodes: 4000, APIServerCores: 1.9}},
		},
	}
	res.fit()
	// cores 0.1, 0.3, 0.5 at 0, 1000, 2000 nodes: 0.0002 cores per node.
	want := Result{Idle: res.Idle, Steps: res.Steps, CPUSecondsPer1000NodesMinute: 12, NodesPerCore: 5000,
		MarginalCPUSecondsPer1000NodesMinute: 12, MarginalNodesPerCore: 5000,
		APIServerHeapPerNode: float64(20<<20) / 2000, EtcdHeapPerNode: float64(2<<20) / 2000}
	for name, got := range map[string][2]float64{
		"through idle": {res.CPUSecondsPer1000NodesMinute, res.NodesPerCore},
		"marginal":     {res.MarginalCPUSecondsPer1000NodesMinute, res.MarginalNodesPerCore},
	} {
		if math.Abs(got[0]-12) > 1e-9 || math.Abs(got[1]-5000) > 1e-6 {
			t.Fatalf("fit %s: %g CPU-s per 1000 nodes per minute, %g nodes per core; want 12 and 5000", name, got[0], got[1])
		}
	}
	res.CPUSecondsPer1000NodesMinute, res.NodesPerCore = want.CPUSecondsPer1000NodesMinute, want.NodesPerCore
	res.MarginalCPUSecondsPer1000NodesMinute, res.MarginalNodesPerCore = want.MarginalCPUSecondsPer1000NodesMinute, want.MarginalNodesPerCore
	if !reflect.DeepEqual(res, want) {
		t.Errorf("fit = %+v\nwant %+v", res, want)
	}
}

func TestFitWithNothingHeld(t *testing.T) {
	res := Result{Steps: []Step{{Reading: Reading{Nodes: 1000}}}}
	res.fit()
	if !math.IsNaN(res.CPUSecondsPer1000NodesMinute) || !math.IsNaN(res.NodesPerCore) || !math.IsNaN(res.MarginalNodesPerCore) || !math.IsNaN(res.APIServerHeapPerNode) {
		t.Errorf("fit with no step held = %+v, want NaN figures", res)
	}
}

func TestWindowReading(t *testing.T) {
	start := time.Unix(1000, 0)
	metrics := func(puts, posts, patches float64) apimetrics.Snapshot {
		s, err := apimetrics.Parse(metricsText(puts, posts, patches))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := counters{startTime: start, metrics: metrics(100, 10, 5),
		api: proc.Usage{CPU: 10 * time.Second}, ctl: proc.Usage{CPU: time.Second}, etcd: []proc.Usage{{CPU: 4 * time.Second}, {CPU: 2 * time.Second}},
		sim: proc.Usage{CPU: 3 * time.Second}, throttle: cgroups.Throttling{Periods: 100, ThrottledPeriods: 10},
		simStats: nodesim.Stats{Nodes: 1000, Renewals: 500, Late: 1, Errors: 2}}
	after := counters{startTime: start.Add(20 * time.Second), metrics: metrics(2100, 20, 45),
		api: proc.Usage{CPU: 20 * time.Second, RSS: 1 << 30}, ctl: proc.Usage{CPU: 2 * time.Second}, etcd: []proc.Usage{{CPU: 8 * time.Second}, {CPU: 4 * time.Second}},
		sim: proc.Usage{CPU: 5 * time.Second}, throttle: cgroups.Throttling{Periods: 300, ThrottledPeriods: 60},
		simStats: nodesim.Stats{Nodes: 1000, Renewals: 2500, StatusUpdates: 40, Late: 4, Errors: 2, MaxLateness: 2 * time.Second, LastError: "x"}}
	got := windowReading(before, after, 1000, 10*time.Second)
	want := Reading{Nodes: 1000, Window: 20 * time.Second, LeaseWriteRate: 100.5, StatusRate: 2,
		APIServerCores: 0.5, EtcdCores: 0.3, ControllerCores: 0.05,
		Simulator: SimulatorReading{Cores: 0.1, ThrottledShare: 0.25, Late: 3, MaxLateness: 2 * time.Second, // no error in the window: no LastError
			Renewals: 2000, StatusReports: 40, ExpectedRenewal: 100}}
	got.MutatingP99 = 0 // the histogram's own tests are apimetrics' and stats'
	if !reflect.DeepEqual(got, want) {
		t.Errorf("windowReading =\n%+v\nwant\n%+v", got, want)
	}
}

func metricsText(puts, posts, statusPatches float64) string {
	line := func(verb, resource, subresource string, v float64) string {
		return `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="` + resource + `",scope="resource",subresource="` +
			subresource + `",verb="` + verb + `",version="v1"} ` + strconv.FormatFloat(v, 'f', -1, 64) + "\n"
	}
	return "# TYPE apiserver_request_total counter\n" + line("PUT", "leases", "", puts) + line("POST", "leases", "", posts) +
		line("PATCH", "nodes", "status", statusPatches) + line("PATCH", "nodes", "", 7)
}

// TestResultJSONHoldsWhatCouldNotBeComputed: one step held has no line
// between steps (NaN), and report.json must still be written.
func TestResultJSONHoldsWhatCouldNotBeComputed(t *testing.T) {
	res := Result{Idle: Reading{MutatingP99: math.NaN()}, Steps: []Step{{Held: true, Reading: Reading{Nodes: 4000, MutatingP99: 0.024, APIServerCores: 0.5}}}}
	res.fit()
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back["MarginalNodesPerCore"] != nil || back["NodesPerCore"] != 8000.0 {
		t.Errorf("MarginalNodesPerCore %v (want null), NodesPerCore %v (want 8000)", back["MarginalNodesPerCore"], back["NodesPerCore"])
	}
	idle := back["Idle"].(map[string]any)
	step := back["Steps"].([]any)[0].(map[string]any)
	if idle["MutatingP99"] != nil || step["MutatingP99"] != 0.024 || step["Held"] != true || step["Nodes"] != 4000.0 {
		t.Errorf("idle %v, step %v", idle["MutatingP99"], step)
	}
}
