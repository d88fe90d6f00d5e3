package server

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/join"
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
	// A node that is not Ready (powered off during an earlier change)
	// holds nothing back, and its annotation is not even read.
	off := node("z", "60s")
	off.Status.Conditions[0].Status = corev1.ConditionUnknown
	offForged := node("y", "87600h")
	offForged.Status.Conditions[0].Status = corev1.ConditionFalse
	aboveBound := "above 40s, the slowest renew interval this cluster's nodes could run with (the published interval, or the slowest in flight when the last change was published)"
	notInterval := "not a renew interval (want a duration above 0s, as the node agent writes)"
	for _, c := range []struct {
		name             string
		published, bound time.Duration
		nodes            []corev1.Node
		slowest          time.Duration
		who              []string
		ignored          []ignoredRenewal
	}{
		{"the slowest annotations", 10 * time.Second, 40 * time.Second, nodes, 20 * time.Second, []string{"a", "d"}, nil},
		{"a NotReady node", 10 * time.Second, 40 * time.Second, append(nodes, off, offForged), 20 * time.Second, []string{"a", "d"}, nil},
		// Nodes without the annotation run the published profile.
		{"the published profile", 30 * time.Second, 40 * time.Second, nodes, 30 * time.Second, []string{"b"}, nil},
		{"an annotation at the bound", 10 * time.Second, 40 * time.Second, append(nodes, node("e", "40s")), 40 * time.Second, []string{"e"}, nil},
		// Not believed: the node counts as on the published profile.
		{"forged and unparsable annotations", 10 * time.Second, 40 * time.Second,
			append(nodes, node("f", "87600h"), node("g", "forty"), node("e", "41s"), node("h", "-5s")), 20 * time.Second, []string{"a", "d"},
			[]ignoredRenewal{{node: "e", value: "41s", why: aboveBound}, {node: "f", value: "87600h", why: aboveBound},
				{node: "g", value: "forty", why: notInterval}, {node: "h", value: "-5s", why: notInterval}}},
		{"a long value, cut", 10 * time.Second, 40 * time.Second, []corev1.Node{node("l", strings.Repeat("9", 70)+"h")}, 10 * time.Second, []string{"l"},
			[]ignoredRenewal{{node: "l", value: strings.Repeat("9", 64) + "...", why: notInterval}}},
	} {
		slowest, who, ignored := slowestRenewal(c.published, c.bound, c.nodes)
		if slowest != c.slowest || !reflect.DeepEqual(who, c.who) || !reflect.DeepEqual(ignored, c.ignored) {
			t.Errorf("%s: slowest %s %v, ignored %+v; want %s %v, %+v", c.name, slowest, who, ignored, c.slowest, c.who, c.ignored)
		}
	}
}

func TestRenewalBound(t *testing.T) {
	for _, c := range []struct {
		published join.Settings
		want      time.Duration
	}{
		{join.Settings{RenewInterval: 10 * time.Second}, 10 * time.Second}, // no key: the published interval
		{join.Settings{RenewInterval: 10 * time.Second, SlowestInFlight: 40 * time.Second}, 40 * time.Second},
		{join.Settings{RenewInterval: 40 * time.Second, SlowestInFlight: 10 * time.Second}, 40 * time.Second},
		{join.Settings{RenewInterval: 10 * time.Second, SlowestInFlight: 87600 * time.Hour}, config.MaxRenewInterval},
	} {
		if got := renewalBound(c.published); got != c.want {
			t.Errorf("renewalBound(renew %s, in flight %s) = %s, want %s", c.published.RenewInterval, c.published.SlowestInFlight, got, c.want)
		}
	}
}

func TestRenewalIgnoredEvent(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	got := renewalIgnoredEvent(ignoredRenewal{node: "n1", uid: "u1", value: "87600h", why: "above 10s, ..."}, "s1", at)
	want := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("n1.%x", at.UnixNano()), Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1"},
		Reason:         "K1mRenewIntervalIgnored",
		Message:        `annotation k1m.dev/node-lease-renew-interval "87600h" is ignored by the server's lease profile change check: above 10s, ...`,
		Type:           "Warning", Source: corev1.EventSource{Component: "k1m-server", Host: "s1"},
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Count: 1,
		ReportingController: "k1m-server", ReportingInstance: "s1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// A node's own annotation is believed only up to the slowest interval the
// cluster could have nodes on: a forged one holds no change back, while a
// node truly still on the interval in flight does.
func TestPhaseLeaseChangeBelievesAnnotationsUpToTheBound(t *testing.T) {
	settings := func(renew, inFlight time.Duration) map[string]string {
		return join.Settings{RenewInterval: renew, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a",
			ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108", RestartSpread: 7 * time.Second, SlowestInFlight: inFlight, PodRoutes: constants.PodRoutesK1m}.Data()
	}
	ignoredEvent := func(node, value, bound string) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node},
			Reason:         "K1mRenewIntervalIgnored",
			Message: `annotation k1m.dev/node-lease-renew-interval "` + value + `" is ignored by the server's lease profile change check: above ` + bound +
				`, the slowest renew interval this cluster's nodes could run with (the published interval, or the slowest in flight when the last change was published)`,
			Type: "Warning", Source: corev1.EventSource{Component: "k1m-server", Host: "s1"}, Count: 1, ReportingController: "k1m-server", ReportingInstance: "s1"}
	}
	refused := "--node-lease-renew-interval 5s: its grace period 25s is too short for a running cluster whose slowest nodes renew every 40s (slow): until each agent has followed k1m-cluster, a node may go 40s plus its agent's restart (15s allowed) without renewing, and would be marked NotReady; change it in steps: down to 11s now, then further once every node's k1m.dev/node-lease-renew-interval annotation shows it"
	for _, c := range []struct {
		name   string
		data   map[string]string
		nodes  []corev1.Node
		want   leaseChange
		err    string
		events []corev1.Event
	}{
		{name: "a forged 87600h is ignored", data: settings(10*time.Second, 0), nodes: []corev1.Node{node("a", "10s"), node("forger", "87600h")},
			want: leaseChange{spread: 20 * time.Millisecond, slowestInFlight: 10 * time.Second}, events: []corev1.Event{ignoredEvent("forger", "87600h", "10s")}},
		{name: "the bound is capped at the longest interval", data: settings(10*time.Second, 87600*time.Hour), nodes: []corev1.Node{node("a", "10s"), node("forger", "3m")},
			want: leaseChange{spread: 20 * time.Millisecond, slowestInFlight: 10 * time.Second}, events: []corev1.Event{ignoredEvent("forger", "3m", "2m0s")}},
		{name: "a node at the interval in flight refuses", data: settings(10*time.Second, 40*time.Second), nodes: []corev1.Node{node("a", "10s"), node("slow", "40s")},
			err: refused},
		{name: "above the interval in flight is ignored", data: settings(10*time.Second, 40*time.Second), nodes: []corev1.Node{node("a", "10s"), node("forger", "41s")},
			want: leaseChange{spread: 20 * time.Millisecond, slowestInFlight: 10 * time.Second}, events: []corev1.Event{ignoredEvent("forger", "41s", "40s")}},
		{name: "no change keeps what is published", data: settings(5*time.Second, 40*time.Second), nodes: []corev1.Node{node("forger", "87600h")},
			want: leaseChange{spread: 7 * time.Second, slowestInFlight: 40 * time.Second}},
		{name: "a new cluster", nodes: []corev1.Node{node("forger", "87600h")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var objects []runtime.Object
			for i := range c.nodes {
				objects = append(objects, &c.nodes[i])
			}
			client := fake.NewSimpleClientset(objects...)
			lease, err := config.LeaseProfileFor(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			s := &Server{cfg: &config.CompletedServer{Lease: lease}, out: io.Discard, nodeName: "s1"}
			got, err := s.phaseLeaseChange(context.Background(), client, c.data)
			if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
				t.Errorf("got %+v, %v\nwant %+v, %s", got, err, c.want, c.err)
			}
			list, _ := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
			events := []corev1.Event{}
			for _, e := range list.Items {
				e.Name, e.FirstTimestamp, e.LastTimestamp = "", metav1.Time{}, metav1.Time{}
				events = append(events, e)
			}
			if want := append([]corev1.Event{}, c.events...); !reflect.DeepEqual(events, want) {
				t.Errorf("events\n got  %+v\n want %+v", events, want)
			}
		})
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

func TestRebalanceSpreadFromThreeThousandNodesInPowersOfTwo(t *testing.T) {
	for nodes, want := range map[int]time.Duration{
		0: 0, 3: 0, 3_000: 0, // the agents' own 30 s
		3_001: 32 * time.Second, 6_400: 64 * time.Second, 10_000: 128 * time.Second, 100_000: 1024 * time.Second,
	} {
		if got := rebalanceSpread(nodes); got != want {
			t.Errorf("rebalanceSpread(%d) = %s, want %s", nodes, got, want)
		}
	}
}

// One start raises at most maxIgnoredReported Events, however many nodes
// forged their annotation: each is a request before the server goes on.
func TestReportIgnoredIsBounded(t *testing.T) {
	var ignored []ignoredRenewal
	for n := range maxIgnoredReported + 5 {
		ignored = append(ignored, ignoredRenewal{node: fmt.Sprintf("n%d", n), value: "87600h", why: "above the bound"})
	}
	client := fake.NewSimpleClientset()
	s := &Server{out: io.Discard, nodeName: "s1"}
	s.reportIgnored(context.Background(), client, ignored, 10*time.Second)
	events, _ := client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if len(events.Items) != maxIgnoredReported {
		t.Errorf("%d Events for %d ignored annotations, want %d", len(events.Items), len(ignored), maxIgnoredReported)
	}
}
