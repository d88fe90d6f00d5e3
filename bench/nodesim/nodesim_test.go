package nodesim

import (
	"bytes"
	"container/heap"
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/bench/leaseflood"
)

var valid = Config{RenewInterval: 10 * time.Second, LeaseDuration: 40 * time.Second, StatusInterval: 5 * time.Minute, Workers: 64, Clients: 16}

func TestValidate(t *testing.T) {
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"no renew interval":       func(c *Config) { c.RenewInterval = 0 },
		"lease not longer":        func(c *Config) { c.LeaseDuration = 10 * time.Second },
		"lease in part-seconds":   func(c *Config) { c.LeaseDuration = 40500 * time.Millisecond },
		"no status interval":      func(c *Config) { c.StatusInterval = 0 },
		"no workers":              func(c *Config) { c.Workers = 0 },
		"more clients than works": func(c *Config) { c.Clients = 65 },
	} {
		c := valid
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, c)
		}
	}
}

func TestFirstBeatsSpreadRenewalsOverOneInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	c := valid
	c.StatusInterval = time.Minute
	got := firstBeats(4, 8, now, c, rand.New(rand.NewPCG(1, 2)))
	var renewals []beat
	for _, b := range got {
		if b.kind == renewal {
			renewals = append(renewals, b)
		} else if b.due.Before(now) || !b.due.Before(now.Add(time.Minute)) {
			t.Errorf("status report of node %d due at %v, want within a minute of %v", b.node, b.due, now)
		}
	}
	want := []beat{
		{due: now, node: 4, kind: renewal},
		{due: now.Add(2500 * time.Millisecond), node: 5, kind: renewal},
		{due: now.Add(5 * time.Second), node: 6, kind: renewal},
		{due: now.Add(7500 * time.Millisecond), node: 7, kind: renewal},
	}
	if !reflect.DeepEqual(renewals, want) || len(got) != 8 {
		t.Errorf("firstBeats renewals = %v (of %d beats), want %v (of 8)", renewals, len(got), want)
	}
}

func TestScheduleGivesTheEarliestFirst(t *testing.T) {
	now := time.Unix(1000, 0)
	var s schedule
	for _, d := range []int{5, 1, 4, 2, 3} {
		heap.Push(&s, beat{due: now.Add(time.Duration(d) * time.Second), node: d})
	}
	var order []int
	for s.Len() > 0 {
		order = append(order, heap.Pop(&s).(beat).node)
	}
	if want := []int{1, 2, 3, 4, 5}; !reflect.DeepEqual(order, want) {
		t.Errorf("popped %v, want %v", order, want)
	}
}

func TestNextWaitsForTheDueTime(t *testing.T) {
	sim := withClients(nil, valid)
	now := time.Unix(1000, 0)
	if _, wait := sim.next(now); wait != time.Hour {
		t.Errorf("empty schedule: wait %v, want an hour", wait)
	}
	heap.Push(&sim.queue, beat{due: now.Add(3 * time.Second), node: 7})
	if _, wait := sim.next(now); wait != 3*time.Second {
		t.Errorf("wait %v, want 3s", wait)
	}
	if b, wait := sim.next(now.Add(3 * time.Second)); wait != 0 || b.node != 7 {
		t.Errorf("due beat: got %+v, wait %v; want node 7 now", b, wait)
	}
}

// runOnFakeAPI registers nodes Nodes in a fake API and runs a simulator
// of them against it until ctx ends.
func runOnFakeAPI(ctx context.Context, t *testing.T, nodes int, cfg Config) (*Simulator, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset()
	if err := leaseflood.RegisterNodes(ctx, client, 0, nodes, min(nodes, 2)); err != nil {
		t.Fatal(err)
	}
	sim := withClients([]kubernetes.Interface{client}, cfg)
	sim.Add(nodes)
	go sim.Run(ctx)
	return sim, client
}

// TestSimulatorRenewsAndReports runs the simulator against a fake API for
// a moment: every node's Lease is created and then renewed with Update,
// and node status is patched.
func TestSimulatorRenewsAndReports(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{RenewInterval: 50 * time.Millisecond, LeaseDuration: time.Second, StatusInterval: 100 * time.Millisecond, Workers: 2, Clients: 1}
	sim, client := runOnFakeAPI(ctx, t, 3, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for s := sim.Stats(); s.Renewals < 9 || s.StatusUpdates < 3; s = sim.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if s := sim.Stats(); s.Errors != 0 || s.Nodes != 3 || s.WithoutLease != 0 {
		t.Errorf("stats %+v, want 3 nodes, each with its Lease, and no errors", s)
	}
	var updates, creates int
	for _, a := range client.Actions() {
		switch {
		case a.GetResource().Resource == "leases" && a.GetVerb() == "update":
			updates++
		case a.GetResource().Resource == "leases" && a.GetVerb() == "create":
			creates++
		}
	}
	if creates != 3 || updates < 6 {
		t.Errorf("%d Lease creates and %d updates, want 3 creates and at least 6 updates", creates, updates)
	}
	lease, err := client.CoordinationV1().Leases(leaseflood.Namespace).Get(context.Background(), leaseflood.ObjectName(2), metav1.GetOptions{})
	if err != nil || *lease.Spec.LeaseDurationSeconds != 1 || *lease.Spec.HolderIdentity != leaseflood.ObjectName(2) {
		t.Errorf("Lease of node 2: %+v, %v", lease, err)
	}
}

type fakeController struct {
	added []int
	stats Stats
}

func (f *fakeController) Add(n int)    { f.added = append(f.added, n); f.stats.Nodes = n }
func (f *fakeController) Stats() Stats { return f.stats }

func TestServeAnswersEachCommand(t *testing.T) {
	f := &fakeController{stats: Stats{Renewals: 9}}
	var out bytes.Buffer
	in := strings.NewReader("add 500\nstats\nadd x\nrenew\n")
	if err := Serve(in, &out, f); err != nil {
		t.Fatal(err)
	}
	want := `{"stats":{"Nodes":500,"WithoutLease":0,"Renewals":9,"StatusUpdates":0,"Errors":0,"Late":0,"MaxLateness":0,"LastError":""}}
{"stats":{"Nodes":500,"WithoutLease":0,"Renewals":9,"StatusUpdates":0,"Errors":0,"Late":0,"MaxLateness":0,"LastError":""}}
{"stats":{"Nodes":0,"WithoutLease":0,"Renewals":0,"StatusUpdates":0,"Errors":0,"Late":0,"MaxLateness":0,"LastError":""},"error":"\"add x\": want add N, N a node count"}
{"stats":{"Nodes":0,"WithoutLease":0,"Renewals":0,"StatusUpdates":0,"Errors":0,"Late":0,"MaxLateness":0,"LastError":""},"error":"\"renew\": want \"add N\" or \"stats\""}
`
	if out.String() != want || !reflect.DeepEqual(f.added, []int{500}) {
		t.Errorf("Serve wrote\n%s\nadded %v; want\n%s\nadded [500]", out.String(), f.added, want)
	}
}

func TestArgs(t *testing.T) {
	want := []string{"simulate-nodes", "--kubeconfig=/tmp/admin.kubeconfig", "--renew-interval=10s", "--lease-duration=40s",
		"--status-interval=5m0s", "--workers=64", "--clients=16"}
	if got := Args("/tmp/admin.kubeconfig", valid); !reflect.DeepEqual(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
}

func TestStatsSub(t *testing.T) {
	later := Stats{Nodes: 10, Renewals: 50, StatusUpdates: 5, Errors: 2, Late: 3, MaxLateness: time.Second, LastError: "x"}
	earlier := Stats{Nodes: 5, Renewals: 20, StatusUpdates: 1, Errors: 1, Late: 1, MaxLateness: time.Minute}
	want := Stats{Nodes: 10, Renewals: 30, StatusUpdates: 4, Errors: 1, Late: 2, MaxLateness: time.Second, LastError: "x"}
	if got := later.Sub(earlier); got != want {
		t.Errorf("Sub = %+v, want %+v", got, want)
	}
}

// TestWithoutLeaseCountsEachNodeOnce: a renewal that fails after the
// node had its Lease starts again from a Get, which must not count the
// node as newly leased a second time.
func TestWithoutLeaseCountsEachNodeOnce(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	sim := withClients([]kubernetes.Interface{client}, valid)
	sim.Add(1)
	if err := sim.renew(ctx, client, 0); err != nil {
		t.Fatal(err)
	}
	// The Lease goes away behind the simulator's back: the Update fails.
	if err := client.CoordinationV1().Leases(leaseflood.Namespace).Delete(ctx, leaseflood.ObjectName(0), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sim.renew(ctx, client, 0); err == nil {
		t.Fatal("the Update of a deleted Lease succeeded")
	}
	if err := sim.renew(ctx, client, 0); err != nil { // Get: not found, Create
		t.Fatal(err)
	}
	if s := sim.Stats(); s.WithoutLease != 0 {
		t.Errorf("WithoutLease = %d after the node's Lease came back, want 0", s.WithoutLease)
	}
}

// TestFinishedBeatWakesTheDispatcher: with every node's renewal in
// flight the dispatcher sleeps until the next queued beat (here a status
// report a minute away); a finished renewal must wake it.
func TestFinishedBeatWakesTheDispatcher(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{RenewInterval: 20 * time.Millisecond, LeaseDuration: time.Second, StatusInterval: time.Minute, Workers: 1, Clients: 1}
	sim, _ := runOnFakeAPI(ctx, t, 1, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for sim.Stats().Renewals < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals of one node at 20 ms in 10 s: the dispatcher slept through them", sim.Stats().Renewals)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
