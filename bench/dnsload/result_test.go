package dnsload

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"k1m.dev/k1m/bench/stats"
)

func TestValidateNamesEachFlag(t *testing.T) {
	if err := (Config{Rates: DefaultRates, Window: DefaultWindow, Sockets: DefaultSockets}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{Rates: []int{2000, 1000}, Window: time.Millisecond}.Validate()
	want := "--dns-rates 2000,1000: want ascending positive query rates, e.g. 1000,10000\n" +
		"--dns-window 1ms: want at least 1s, e.g. 10s\n--dns-sockets 0: want at least 1, e.g. 16"
	if fmt.Sprint(err) != want {
		t.Errorf("Validate() =\n%v\nwant\n%s", err, want)
	}
}

func TestCapacityIsTheHighestRateHeldInEveryRound(t *testing.T) {
	r := Result{Config: Config{Rates: []int{1000, 2000, 5000}}, Steps: []Step{
		{Round: 1, Rate: 1000, Held: true}, {Round: 1, Rate: 2000, Held: true}, {Round: 1, Rate: 5000},
		{Round: 2, Rate: 1000, Held: true}, {Round: 2, Rate: 2000}, // the second round ended at 2000
	}}
	if got := r.Capacity(); got != 1000 {
		t.Errorf("Capacity() = %d, want 1000", got)
	}
	r.Steps = r.Steps[:1]
	r.Steps[0].Held = false
	if got := r.Capacity(); got != 0 {
		t.Errorf("Capacity() with the first step not held = %d, want 0", got)
	}
}

func TestCSVRowsAreEachStepsFigures(t *testing.T) {
	r := Result{Steps: []Step{{Round: 1, Rate: 1000, Window: 10 * time.Second, Elapsed: 11 * time.Second,
		Reading:      Reading{Sent: 10000, Answered: 9980, Failed: 10, Latency: latency(200*time.Microsecond, 900*time.Microsecond)},
		CoreDNSCores: 0.25, CPUPerQuery: 275 * time.Microsecond, BenchCores: 0.1}}}
	got := r.CSVRows()
	want := [][]string{{"1", "1000", "10", "10000", "9980", "10", "10", "0.002", "998", "200", "0", "900", "0", "0.25", "275", "0.1", "false", "false"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CSVRows() =\n%v\nwant\n%v", got, want)
	}
	if len(got[0]) != len(r.CSVHeader()) {
		t.Errorf("%d columns, header has %d", len(got[0]), len(r.CSVHeader()))
	}
}

func latency(p50, p99 time.Duration) stats.Latency { return stats.Latency{P50: p50, P99: p99} }

func TestValidateKeepsEachSocketsIDsFromComingRound(t *testing.T) {
	err := Config{Rates: []int{1000, 100000}, Window: DefaultWindow, Sockets: 1}.Validate()
	want := "--dns-rates up to 100000 over --dns-sockets 1: want at most 60000 queries a second per socket, e.g. --dns-sockets 2"
	if fmt.Sprint(err) != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
	if err := (Config{Rates: []int{120000}, Window: DefaultWindow, Sockets: 2}).Validate(); err != nil {
		t.Errorf("120,000 a second over 2 sockets: %v", err)
	}
}
