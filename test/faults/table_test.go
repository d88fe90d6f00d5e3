package faults

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestSelect(t *testing.T) {
	names := func(s []Scenario) []string {
		var out []string
		for _, x := range s {
			out = append(out, x.Name)
		}
		return out
	}
	all := []string{"kill-9", "sigterm", "stop-while-reboot", "rolling", "all-stop", "partition-server", "partition-agent", "disk-full"}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", all},
		{"all", all},
		{"ci", []string{"kill-9", "stop-while-reboot", "partition-server"}},
		{"disk-full,kill-9", []string{"disk-full", "kill-9"}},
		// Named only, and first: the cluster starts on the earlier
		// release.
		{"kill-9,upgrade", []string{"upgrade", "kill-9"}},
		// make upgrade-test: the upgrade, then the CI subset on the
		// upgraded cluster.
		{"upgrade,ci", []string{"upgrade", "kill-9", "stop-while-reboot", "partition-server"}},
		{"ci,kill-9,disk-full", []string{"kill-9", "stop-while-reboot", "partition-server", "disk-full"}},
	} {
		got, err := Select(tc.in)
		if err != nil || !reflect.DeepEqual(names(got), tc.want) {
			t.Errorf("Select(%q) = %v, %v; want %v", tc.in, names(got), err, tc.want)
		}
	}
	_, err := Select("kill-9,nope")
	want := "SCENARIOS=kill-9,nope: no scenario nope; want a comma-separated list of kill-9, sigterm, stop-while-reboot, rolling, all-stop, partition-server, partition-agent, disk-full, upgrade, or all, or ci"
	if err == nil || err.Error() != want {
		t.Errorf("Select of an unknown name: %v, want %q", err, want)
	}
}

func TestLongestStall(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// Two writers' acknowledgements, unordered; one before the window.
	times := []time.Time{at(-1), at(3), at(1), at(9.5), at(2), at(10)}
	if got, want := LongestStall(times, at(0), at(12)), 6500*time.Millisecond; got != want {
		t.Errorf("LongestStall = %s, want %s (from 3 s to 9.5 s)", got, want)
	}
	if got, want := LongestStall(nil, at(0), at(12)), 12*time.Second; got != want {
		t.Errorf("LongestStall with no acknowledgement = %s, want the whole window %s", got, want)
	}
	if got, want := LongestStall(times, at(0), at(20)), 10*time.Second; got != want {
		t.Errorf("LongestStall to 20 s = %s, want the tail %s", got, want)
	}
}

func TestTable(t *testing.T) {
	results := []Result{
		{Scenario: "kill-9", Acked: 1200, Stall: 4300 * time.Millisecond, NotReady: map[string]int{"k1m-server-2": 31}, Converge: 12 * time.Second},
		{Scenario: "partition-agent", Acked: 900, Missing: 2, Stall: 61 * time.Second, NotReady: map[string]int{"k1m-node-1": 20, "k1m-server-1": 3},
			Converge: -1, Failed: []string{invLost, invConverge}},
	}
	want := `| scenario | acknowledged | missing | longest write stall | NotReady seconds | time to converge | failed invariants |
|---|---:|---:|---:|---|---:|---|
| kill-9 | 1200 | 0 | 4.3 s | k1m-server-2: 31 | 12 s | none |
| partition-agent | 900 | 2 | 61.0 s | k1m-node-1: 20, k1m-server-1: 3 | not within 3m0s | no acknowledged write lost; servers converge |
`
	if got := Table(results); got != want {
		t.Errorf("Table:\n%s\nwant:\n%s", got, want)
	}
}

func TestReplaceTable(t *testing.T) {
	doc := "# HA\n\n" + tableBegin + "\nold table\n" + tableEnd + "\n\nafter\n"
	got, err := ReplaceTable(doc, "| new |\n")
	want := "# HA\n\n" + tableBegin + "\n| new |\n" + tableEnd + "\n\nafter\n"
	if err != nil || got != want {
		t.Errorf("ReplaceTable = %q, %v; want %q", got, err, want)
	}
	wantErr := `no "` + tableBegin + `" ... "` + tableEnd + `" markers in order`
	if _, err := ReplaceTable("# HA\n", "x"); err == nil || err.Error() != wantErr {
		t.Errorf("ReplaceTable without markers: %v, want %s", err, wantErr)
	}
}

func TestViolation(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC).Unix()
	why := readyCondition(&corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "PLEG is not healthy: pleg has yet to be successful"},
	}}})
	first := sighting{at: time.Unix(t0, 0), server: 2, ready: why}
	got := violation("k1m-node-1", map[int64]bool{t0 + 5: true, t0: true, t0 + 1: true}, first)
	want := "node k1m-node-1 NotReady for 3 s (04:00:00 to 04:00:05 UTC, first seen through server 2: Ready=False KubeletNotReady: PLEG is not healthy: pleg has yet to be successful) while a majority of the servers ran and its own server was not out"
	if got != want {
		t.Errorf("violation = %q, want %q", got, want)
	}
	if got, want := readyCondition(&corev1.Node{}), "no Ready condition"; got != want {
		t.Errorf("readyCondition of a node without conditions = %q, want %q", got, want)
	}
}

func TestStampNamesTheCommitNotADate(t *testing.T) {
	got := Stamp("82bc03c", 8*time.Minute+3*time.Second+400*time.Millisecond, "all", "1", "", "| table |\n")
	want := "Run on the tree of commit 82bc03c, 8m3s in all (`make faults SCENARIOS=all REPEAT=1`):\n\n| table |\n"
	if got != want {
		t.Errorf("Stamp:\n got %q\nwant %q", got, want)
	}
	got = Stamp("82bc03c", time.Minute, "kill-9", "2", "pods,nodes", "| table |\n")
	want = "Run on the tree of commit 82bc03c, 1m0s in all (`make faults SCENARIOS=kill-9 REPEAT=2 PARTITIONS=pods,nodes`):\n\n| table |\n"
	if got != want {
		t.Errorf("Stamp with partitions:\n got %q\nwant %q", got, want)
	}
}
