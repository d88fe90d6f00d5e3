package server

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
)

func node(name, renew string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if renew != "" {
		n.Annotations = map[string]string{constants.NodeRenewIntervalAnnotation: renew}
	}
	return n
}

func TestSlowestRenewal(t *testing.T) {
	nodes := []corev1.Node{node("c", "10s"), node("a", "20s"), node("b", ""), node("d", "20s")}
	got, who := slowestRenewal(10*time.Second, nodes)
	if got != 20*time.Second || !reflect.DeepEqual(who, []string{"a", "d"}) {
		t.Errorf("slowest %s %v, want 20s [a d]", got, who)
	}
	// A node that is not Ready (powered off during an earlier change)
	// holds nothing back.
	off := node("z", "60s")
	off.Status.Conditions[0].Status = corev1.ConditionUnknown
	if got, who := slowestRenewal(10*time.Second, append(nodes, off)); got != 20*time.Second || !reflect.DeepEqual(who, []string{"a", "d"}) {
		t.Errorf("with a NotReady node at 60s: slowest %s %v, want 20s [a d]", got, who)
	}
	// Nodes without the annotation run the published profile.
	got, who = slowestRenewal(30*time.Second, nodes)
	if got != 30*time.Second || !reflect.DeepEqual(who, []string{"b"}) {
		t.Errorf("slowest %s %v, want 30s [b]", got, who)
	}
}

func TestCheckLeaseChange(t *testing.T) {
	profile := func(renew time.Duration) config.LeaseProfile {
		p, err := config.LeaseProfileFor(renew)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, ok := range []struct{ from, to time.Duration }{
		{10 * time.Second, 5 * time.Second}, // grace 25s >= 10s + 15s
		{5 * time.Second, 4 * time.Second},  // 20s >= 5s + 15s
		{5 * time.Second, 60 * time.Second}, // longer: always
		{2 * time.Second, 3 * time.Second},  // longer, even with a grace period under the allowance
	} {
		if err := checkLeaseChange(profile(ok.to), ok.from, []string{"n1"}); err != nil {
			t.Errorf("%s -> %s: %v", ok.from, ok.to, err)
		}
	}
	err := checkLeaseChange(profile(3*time.Second), 5*time.Second, []string{"n1", "n2"})
	want := "--node-lease-renew-interval 3s: its grace period 15s is too short for a running cluster whose slowest nodes renew every 5s (n1, n2): until each agent has followed k1m-cluster, a node may go 5s plus its agent's restart (15s allowed) without renewing, and would be marked NotReady; change it in steps: down to 4s now, then further once every node's k1m.dev/node-lease-renew-interval annotation shows it"
	if err == nil || err.Error() != want {
		t.Errorf("5s -> 3s:\ngot  %v\nwant %s", err, want)
	}
	err = checkLeaseChange(profile(10*time.Second), 40*time.Second, []string{"a", "b", "c", "d", "e", "f", "g"})
	want = "--node-lease-renew-interval 10s: its grace period 50s is too short for a running cluster whose slowest nodes renew every 40s (a, b, c, d, e and 2 more): until each agent has followed k1m-cluster, a node may go 40s plus its agent's restart (15s allowed) without renewing, and would be marked NotReady; change it in steps: down to 11s now, then further once every node's k1m.dev/node-lease-renew-interval annotation shows it"
	if err == nil || err.Error() != want {
		t.Errorf("40s -> 10s:\ngot  %v\nwant %s", err, want)
	}
}

func TestRestartSpreadKeepsTheRestartRate(t *testing.T) {
	for nodes, want := range map[int]time.Duration{0: 0, 3: 30 * time.Millisecond, 10_000: 100 * time.Second, 100_000: 1000 * time.Second} {
		if got := restartSpread(nodes); got != want {
			t.Errorf("restartSpread(%d) = %s, want %s", nodes, got, want)
		}
	}
}
