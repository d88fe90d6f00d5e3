package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
)

func leaseRow(variant string, round int, rate float64, cpu time.Duration, updates int64) LeaseRow {
	return LeaseRow{Variant: variant, Round: round, Result: leaseflood.Result{
		Updates: updates, Rate: rate, Latency: stats.Latency{P99: 100 * time.Millisecond},
		APIServer: proc.Usage{CPU: cpu, GCCPU: cpu / 10},
	}}
}

func TestSummaryTakesMediansAndRatiosAgainstStock(t *testing.T) {
	rep := &Report{Lease: []LeaseRow{
		leaseRow(Stock, 1, 1000, 2*time.Second, 1000),
		leaseRow(K1m, 1, 1500, time.Second, 1000),
		leaseRow(Stock, 2, 800, 2*time.Second, 1000),
		leaseRow(K1m, 2, 1700, time.Second, 1000),
		leaseRow(Stock, 3, 900, 2*time.Second, 1000),
		leaseRow(K1m, 3, 9000, time.Second, 1000), // an outlier round: the median ignores it
	}}
	s := rep.Summary()
	// stock median 900/s; k1m median 1700/s -> x1.89; CPU 2000 vs 1000 us/update -> x0.50.
	for _, want := range []string{"| stock | 900 | ", "| k1m | 1700 (x1.89) | ", "2000 |", "1000 (x0.50)"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "| stock |") > strings.Index(s, "| k1m |") {
		t.Errorf("stock (the baseline) is not the first row:\n%s", s)
	}
}

func TestOrderAlternates(t *testing.T) {
	names := []string{"a", "b", "c"}
	if got := strings.Join(order(names, 0), ""); got != "abc" {
		t.Errorf("round 0: %s", got)
	}
	if got := strings.Join(order(names, 1), ""); got != "cba" {
		t.Errorf("round 1: %s", got)
	}
	if strings.Join(names, "") != "abc" {
		t.Errorf("order modified its input")
	}
}

// The registry names each scenario once, the default ones first (make
// bench's quick profile runs no local cluster).
func TestScenarioRegistry(t *testing.T) {
	seen := map[string]bool{}
	for i, s := range registry {
		if seen[s.Name] || s.Run == nil {
			t.Errorf("scenario %d %q: named twice or without a run", i, s.Name)
		}
		seen[s.Name] = true
	}
	if want := []string{"lease", "etcd", "nodes", "watchcache"}; !slices.Equal(DefaultScenarios, want) {
		t.Errorf("default scenarios %v, want %v", DefaultScenarios, want)
	}
	if _, err := scenarioNamed("nope"); err == nil || !strings.HasPrefix(err.Error(), `--scenarios: unknown scenario "nope", want some of lease,etcd,`) {
		t.Errorf("unknown scenario: %v", err)
	}
}
