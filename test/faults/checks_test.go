package faults

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var nodeNames = []string{"k1m-node-1", "k1m-node-2", "k1m-server-1", "k1m-server-2", "k1m-server-3"}

func node(name string, ready bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", Message: "kubelet is posting ready status"}}}}
}

func lease(name, holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &metav1.MicroTime{Time: renewed}}}
}

// cluster is what one server answers: every node Ready and its Lease
// renewed at renewed, but for the changes given.
func cluster(renewed time.Time, notReady map[string]bool, leases map[string]time.Time) kubernetes.Interface {
	var objs []runtime.Object
	for _, n := range nodeNames {
		objs = append(objs, node(n, !notReady[n]))
		at, ok := leases[n]
		if !ok {
			at = renewed
		}
		objs = append(objs, lease(n, n, at))
	}
	return fake.NewClientset(objs...)
}

func fixtureOf(clients ...kubernetes.Interface) *Fixture {
	return &Fixture{clients: clients, out: map[int]bool{}, excused: map[string]bool{}}
}

func TestNodesReady(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	all := fixtureOf(cluster(now, nil, nil), cluster(now, nil, nil), cluster(now, nil, nil))
	if err := all.nodesReady(ctx); err != nil {
		t.Errorf("every node Ready through every server: %v", err)
	}
	one := fixtureOf(cluster(now, nil, nil), cluster(now, map[string]bool{"k1m-node-2": true}, nil), cluster(now, nil, nil))
	err := one.nodesReady(ctx)
	if want := "through server 2: 5 nodes, NotReady: [k1m-node-2]"; err == nil || err.Error() != want {
		t.Errorf("node 2 NotReady through server 2: %v, want %q", err, want)
	}
}

func TestLeasesAgree(t *testing.T) {
	ctx := context.Background()
	healed := time.Now().Add(-10 * time.Second)
	fresh := time.Now().Add(-2 * time.Second)
	for _, c := range []struct {
		what    string
		servers []kubernetes.Interface
		excused map[string]bool
		want    string // "" for none
	}{
		{"every Lease fresh", []kubernetes.Interface{cluster(fresh, nil, nil), cluster(fresh, nil, nil), cluster(fresh, nil, nil)}, nil, ""},
		{"a stale Lease", []kubernetes.Interface{cluster(fresh, nil, nil), cluster(fresh, nil, map[string]time.Time{"k1m-node-1": time.Now().Add(-time.Minute)}), cluster(fresh, nil, nil)}, nil,
			"through server 2: Leases not renewed within 40s: [k1m-node-1]"},
		{"an excused node not renewed since the heal", []kubernetes.Interface{cluster(fresh, nil, map[string]time.Time{"k1m-server-3": healed.Add(-time.Second)}), cluster(fresh, nil, nil), cluster(fresh, nil, nil)},
			map[string]bool{"k1m-server-3": true},
			"through server 1: Leases of nodes whose server was out not renewed since the heal: [k1m-server-3]"},
	} {
		f := fixtureOf(c.servers...)
		err := f.leasesAgree(ctx, c.excused, healed)
		if got := errText(err); got != c.want {
			t.Errorf("%s: leasesAgree = %q, want %q", c.what, got, c.want)
		}
	}
	other := fake.NewClientset(lease("k1m-node-1", "someone-else", fresh))
	f := fixtureOf(cluster(fresh, nil, nil), other, cluster(fresh, nil, nil))
	if err := f.leasesAgree(ctx, nil, healed); err == nil || !strings.Contains(err.Error(), "through server 2: 1 node Leases (k1m-node-1=someone-else), want 5") {
		t.Errorf("a server with other Leases: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The monitor counts a NotReady node as a violation only while a
// majority runs and the node is not excused, and reads nothing through a
// server that is out.
func TestMonitorSample(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	notReady := map[string]bool{"k1m-node-1": true, "k1m-server-3": true}
	f := fixtureOf(cluster(now, notReady, nil), cluster(now, nil, nil), cluster(now, notReady, nil))
	f.out[3] = true
	f.excused["k1m-server-3"] = true
	m := &Monitor{f: f, cancel: func() {}, notReady: map[string]map[int64]bool{}, violations: map[string]map[int64]bool{},
		first: map[string]sighting{}, leaseAge: map[string]time.Duration{}}
	for i := 1; i <= Servers; i++ {
		m.sample(ctx, i)
	}
	r := m.Stop()
	if want := map[string]int{"k1m-node-1": 1, "k1m-server-3": 1}; !reflect.DeepEqual(r.NotReadySeconds, want) {
		t.Errorf("NotReadySeconds = %v, want %v (server 3 is out: not read)", r.NotReadySeconds, want)
	}
	if len(r.Violations) != 1 || !strings.HasPrefix(r.Violations[0], "node k1m-node-1 NotReady for 1 s (") ||
		!strings.HasSuffix(r.Violations[0], "first seen through server 1: Ready=False KubeletReady: kubelet is posting ready status) while a majority of the servers ran and its own server was not out") {
		t.Errorf("Violations = %q, want one for k1m-node-1 through server 1 (k1m-server-3 is excused)", r.Violations)
	}
	if _, seen := r.OldestLease["k1m-server-3"]; seen || len(r.OldestLease) != Nodes-1 {
		t.Errorf("OldestLease = %v, want every node's but the excused k1m-server-3", r.OldestLease)
	}

	f.out[2] = true // 1 of 3 servers runs: no majority, no violation
	m = &Monitor{f: f, cancel: func() {}, notReady: map[string]map[int64]bool{}, violations: map[string]map[int64]bool{},
		first: map[string]sighting{}, leaseAge: map[string]time.Duration{}}
	m.sample(ctx, 1)
	if r := m.Stop(); len(r.Violations) != 0 || r.NotReadySeconds["k1m-node-1"] != 1 {
		t.Errorf("without a majority: %+v, want k1m-node-1 seen NotReady and no violation", r)
	}
}
