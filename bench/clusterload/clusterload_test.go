package clusterload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/cpuprofile"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/lograte"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/stats"
)

func TestValidateNamesEachFlag(t *testing.T) {
	good := Config{Steps: []int{500, 1000}, Pods: 1000, Replicas: 10, Pace: 20, NodesPerConnection: 50}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", good, err)
	}
	bad := Config{Steps: []int{1000, 500}, Pods: 25, Replicas: 10, Pace: -1, NodesPerConnection: 0, JoinRate: -1, Servers: 6}
	want := "--cluster-nodes 1000,500: want ascending positive node counts, e.g. 500,1000,2000\n" +
		"--cluster-pods 25: want a positive multiple of --cluster-replicas (10), e.g. 1000\n" +
		"--cluster-pace -1: want pods a second above 0, e.g. 20\n" +
		"--cluster-nodes-per-connection 0: want at least 1, e.g. 50\n" +
		"--cluster-servers 6: want 1 to 5 servers, e.g. 3\n" +
		"--cluster-join-rate -1: want nodes a second above 0, e.g. 25, or 0 for every node at once"
	if err := bad.Validate(); fmt.Sprint(err) != want {
		t.Errorf("Validate(%+v) =\n%v\nwant\n%s", bad, err, want)
	}
}

// TestNodeWatchesAskForWhatTheirComponentsAskFor opens every watch of one
// node against a fake API and compares each list's resource, namespace
// and selectors with what the kubelet, kube-proxy and k1m agent ask for.
func TestNodeWatchesAskForWhatTheirComponentsAskFor(t *testing.T) {
	client := fake.NewClientset()
	type asked struct{ Resource, Namespace, Labels, Fields string }
	var got []asked
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.ListAction).GetListRestrictions()
		got = append(got, asked{a.GetResource().Resource, a.GetNamespace(), l.Labels.String(), l.Fields.String()})
		return false, nil, nil
	})
	for _, w := range NodeWatches {
		if _, err := w.open(client, "node-0000007").list(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatalf("%s, %s: %v", w.Who, w.What, err)
		}
	}
	want := []asked{
		{"nodes", "", "", "metadata.name=node-0000007"},
		{"pods", "", "", "spec.nodeName=node-0000007"},
		{"services", "", "", ""},
		{"csidrivers", "", "", ""},
		{"runtimeclasses", "", "", ""},
		{"nodes", "", "", "metadata.name=node-0000007"},
		{"services", "", "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name", ""},
		{"endpointslices", "", "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name", ""},
		{"nodes", "", "", "metadata.name=node-0000007"},
		{"configmaps", "k1m-pod-routes", "k1m.dev/pod-route", ""},
		{"configmaps", "kube-public", "", "metadata.name=k1m-cluster"},
		{"endpointslices", "default", "kubernetes.io/service-name=kubernetes", ""},
		{"configmaps", "k1m-netpol", "", "metadata.name=node-0000007"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lists asked\n%v\nwant\n%v", got, want)
	}
	if NodeWatches[podWatch].What != "its pods" {
		t.Errorf("podWatch is %q, want the kubelet's watch of its pods", NodeWatches[podWatch].What)
	}
	if NodeWatches[rulesWatch].What != "its NetworkPolicy rules" {
		t.Errorf("rulesWatch is %q, want the k1m agent's watch of its NetworkPolicy rules", NodeWatches[rulesWatch].What)
	}
}

func TestRunningPatchIsAKubeletsStatusReport(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	patch, err := RunningPatch(pod, "fd00:20::1", now)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata struct{ UID string }
		Status   corev1.PodStatus
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%s: %v", patch, err)
	}
	tm := metav1.NewTime(now)
	cond := func(c corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: tm}
	}
	started := true
	cs := got.Status.ContainerStatuses
	if len(cs) != 1 || len(cs[0].ContainerID) != len("containerd://")+64 {
		t.Fatalf("container statuses %+v, want one with a containerd ID", cs)
	}
	want := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "fd00:20::1", PodIPs: []corev1.PodIP{{IP: "fd00:20::1"}}, StartTime: &tm,
		QOSClass:   corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{cond(corev1.PodReadyToStartContainers), cond(corev1.PodInitialized), cond(corev1.ContainersReady), cond(corev1.PodReady)},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.k8s.io/pause:3.10", Ready: true, Started: &started,
			ContainerID: cs[0].ContainerID, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: tm}}}}}
	// Compared as JSON: decoded times carry the local zone.
	gotJSON, _ := json.Marshal(got.Status)
	wantJSON, _ := json.Marshal(want)
	if got.Metadata.UID != "u1" || !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("patch %s\ndecodes to %+v\nwant %+v", patch, got.Status, want)
	}
}

func TestPodIPsAreUniqueIPv6(t *testing.T) {
	f := &fleet{}
	seen := map[string]bool{}
	for i := 0; i < 300; i++ {
		ip := f.nextPodIP()
		if seen[ip] {
			t.Fatalf("%s given twice", ip)
		}
		seen[ip] = true
	}
	if !seen["fd00:20::1"] || !seen["fd00:20::100"] {
		t.Errorf("want fd00:20::1 and fd00:20::100 among %d addresses", len(seen))
	}
}

func TestTrackerTimesEachPod(t *testing.T) {
	tr := newTracker()
	pod := func(uid, ns, node string, phase corev1.PodPhase, ready bool) watch.Event {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID(uid), Namespace: ns}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: phase}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return watch.Event{Type: watch.Modified, Object: p}
	}
	tr.see(pod("a", "s0", "", corev1.PodPending, false))
	tr.see(pod("b", "s0", "", corev1.PodPending, false))
	tr.see(pod("c", "s1", "", corev1.PodPending, false))
	time.Sleep(5 * time.Millisecond)
	tr.see(pod("a", "s0", "n1", corev1.PodPending, false))
	tr.see(pod("a", "s0", "n1", corev1.PodRunning, false)) // running, not ready: not started
	tr.see(pod("a", "s0", "n1", corev1.PodRunning, true))
	tr.see(pod("b", "s0", "n2", corev1.PodPending, false))
	s := tr.of("s0")
	if s.pods != 2 || s.running != 1 || s.startup.Count != 1 || s.scheduling.Count != 2 {
		t.Fatalf("of(s0) = %+v, want 2 pods, 1 running, 2 bound", s)
	}
	if s.startup.P99 < 5*time.Millisecond || s.last.IsZero() || s.lastBound.Before(s.firstAdded) {
		t.Errorf("of(s0) = %+v: want startup of at least 5ms and bound after first seen", s)
	}
	if c := tr.of("s1"); c.pods != 1 || c.running != 0 {
		t.Errorf("of(s1) = %+v, want 1 pod, none running", c)
	}
}

func TestWorstIsTheLargestShareOfItsBound(t *testing.T) {
	bucket := func(fast, slow float64) []stats.Bucket {
		return []stats.Bucket{{UpperBound: 0.1, Count: fast}, {UpperBound: 2, Count: fast + slow}, {UpperBound: math.Inf(1), Count: fast + slow}}
	}
	list := apimetrics.Call{Verb: "LIST", Resource: "pods", Scope: "cluster"}
	get := apimetrics.Call{Verb: "LIST", Resource: "nodes", Scope: "resource"}
	few := apimetrics.Call{Verb: "LIST", Resource: "services", Scope: "resource"}
	before := map[apimetrics.Call][]stats.Bucket{list: bucket(0, 0), get: bucket(100, 0)}
	after := map[apimetrics.Call][]stats.Bucket{list: bucket(0, 100), get: bucket(190, 10), few: bucket(0, 10)}
	got := worst(after, before, func(c apimetrics.Call) time.Duration { return ListSLO[c.Scope] })
	// pods (cluster scope, 30 s): p99 near 2 s; nodes (resource, 1 s): 10 of
	// 100 slow, p99 near 2 s, the larger share; services: too few calls.
	if got.Call != "LIST nodes (resource)" || got.Bound != time.Second || got.Calls != 100 || got.P99 < time.Second {
		t.Errorf("worst = %+v, want LIST nodes (resource) over 100 calls, p99 over its 1 s bound", got)
	}
}

func TestLargestHeldStopsAtTheFirstStepNotHeld(t *testing.T) {
	r := Result{Steps: []Step{
		{Flavour: "k1m", Round: 1, Nodes: 500, Held: true}, {Flavour: "k1m", Round: 1, Nodes: 1000, Held: true},
		{Flavour: "k1m", Round: 1, Nodes: 2000, Held: false}, {Flavour: "k1m", Round: 2, Nodes: 500, Held: true},
		{Flavour: "k1m", Round: 2, Nodes: 1000, Held: false}, {Flavour: "stock", Round: 1, Nodes: 500, Held: false},
		{Flavour: "stock", Round: 1, Nodes: 1000, Held: true},
	}}
	if got := r.LargestHeld("k1m"); got != 500 {
		t.Errorf("LargestHeld(k1m) = %d, want 500 (1000 failed in round 2)", got)
	}
	if got := r.LargestHeld("stock"); got != 0 {
		t.Errorf("LargestHeld(stock) = %d, want 0 (its first step failed)", got)
	}
}

func TestJudgeNamesEachReason(t *testing.T) {
	s := Step{NotReady: 3, PodStartup: stats.Latency{P99: 6 * time.Second},
		WorstMutating: CallP99{Call: "POST services", P99: 2 * time.Second, Bound: time.Second},
		WorstList:     CallP99{Call: "LIST pods (cluster)", P99: time.Second, Bound: 30 * time.Second}}
	s.judge([]string{"10 of 20 running"})
	want := []string{"10 of 20 running", "3 simulated nodes NotReady", "mutating p99 2s (POST services) over 1s", "pod startup p99 6s over 5s"}
	if s.Held || !reflect.DeepEqual(s.Reasons, want) {
		t.Errorf("judge: held %v, reasons %q, want not held, %q", s.Held, s.Reasons, want)
	}
	ok := Step{WorstMutating: CallP99{P99: time.Second, Bound: time.Second}}
	if ok.judge(nil); !ok.Held || ok.Reasons != nil {
		t.Errorf("judge of a step within every bound: held %v, reasons %q", ok.Held, ok.Reasons)
	}
}

func TestControllerSyncArgsGiveTheLoadsControllersNWorkers(t *testing.T) {
	want := []string{
		"--kube-controller-manager-arg=concurrent-deployment-syncs=20",
		"--kube-controller-manager-arg=concurrent-replicaset-syncs=20",
		"--kube-controller-manager-arg=concurrent-endpoint-syncs=20",
		"--kube-controller-manager-arg=concurrent-service-endpoint-syncs=20",
	}
	if got := ControllerSyncArgs(20); !reflect.DeepEqual(got, want) {
		t.Errorf("ControllerSyncArgs(20) =\n%q\nwant\n%q", got, want)
	}
}

func TestValidateRefusesAWorkerCountBelowOne(t *testing.T) {
	c := Config{Steps: []int{500}, Pods: 1000, Replicas: 10, Pace: 20, NodesPerConnection: 50, Syncs: []int{5, 0}}
	want := "--cluster-syncs 0: want worker counts of at least 1, e.g. 5,20 (empty: the two builds at their defaults)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
}

func TestValidateRefusesARouteEventBudgetBelowOne(t *testing.T) {
	c := Config{Steps: []int{500}, Pods: 1000, Replicas: 10, Pace: 20, NodesPerConnection: 50, RouteEvents: []int{2500, 0}}
	want := "--cluster-route-events 0: want route event budgets of at least 1, e.g. 2500,100000 (empty: the two builds at their defaults)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
}

func TestLogMarkdownGivesEachStepsRateAndSources(t *testing.T) {
	r := &Result{Steps: []Step{{Flavour: "k1m", Round: 1, Nodes: 2000, IdleLog: lograte.Window{Duration: IdleLogWindow, PerSecond: 155,
		Top: []lograte.Source{{Source: "range_allocator.go:247", PerSecond: 100}, {Source: "topologycache.go:237", PerSecond: 50.5}}}}}}
	var b strings.Builder
	r.logMarkdown(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := "| k1m | 1 | 2000 | 155.0 | 77.5 | range_allocator.go:247 100.0, topologycache.go:237 50.5 |"
	if got := lines[len(lines)-1]; got != want {
		t.Errorf("row %q, want %q", got, want)
	}
}

func TestJoinCPUPerNodeIsTheTreesCPUOverTheBurstPerNode(t *testing.T) {
	s := Step{Joined: 20 * time.Second, JoinedNodes: 1000,
		JoinProcesses: []Component{{Name: "kube-apiserver", Cores: 0.9}, {Name: "etcd", Cores: 0.3}, {Name: "kubelet", Cores: 0.05}}}
	// 1.25 cores for 20 s is 25 CPU-seconds, over 1,000 nodes.
	if got, want := s.JoinCPUPerNode(), 25*time.Millisecond; got != want {
		t.Errorf("JoinCPUPerNode = %v, want %v", got, want)
	}
	if got := (Step{Joined: time.Second}).JoinCPUPerNode(); got != 0 {
		t.Errorf("JoinCPUPerNode with no node joined = %v, want 0", got)
	}
}

func TestJoinRatiosPairEachK1mStepWithStocksOfTheSameSizeAndRound(t *testing.T) {
	step := func(flavour string, nodes, round int, cores float64, joined time.Duration) Step {
		return Step{Flavour: flavour, Nodes: nodes, Round: round, Joined: joined, JoinedNodes: nodes,
			JoinProcesses: []Component{{Name: "server", Cores: cores}}}
	}
	rows := []Step{
		step(deployed.Stock, 1000, 1, 1.0, 10*time.Second),
		step(deployed.K1m, 1000, 1, 1.2, 15*time.Second),
		step(deployed.K1m, 2000, 1, 1.2, 30*time.Second), // no stock step of 2,000 nodes
	}
	want := []string{"k1m/stock, 1000 nodes, round 1: CPU per node joined 1.80x, burst 1.50x as long.\n"}
	if got := joinRatios(rows); !reflect.DeepEqual(got, want) {
		t.Errorf("joinRatios = %q, want %q", got, want)
	}
}

func TestBusiestNamesTheProcessesWithTheMostCores(t *testing.T) {
	ps := []Component{{Name: "etcd", Cores: 0.3}, {Name: "kube-apiserver", Cores: 0.9}, {Name: "kubelet", Cores: 0.05}, {Name: "k1m", Cores: 0.4}}
	if got, want := busiest(ps, 3), "kube-apiserver 0.90, k1m 0.40, etcd 0.30"; got != want {
		t.Errorf("busiest = %q, want %q", got, want)
	}
}

func TestJoinProfileMarkdownNamesTheLargestCostsOrWhyThereIsNone(t *testing.T) {
	rows := []Step{
		{Flavour: deployed.Stock, Nodes: 1000, Round: 1, JoinProfile: &JoinProfile{Path: "/r/runs/cluster-stock-1/join-1000.cpu.pprof", Total: 12340 * time.Millisecond,
			Shares: []cpuprofile.Share{{Category: "etcd", Fraction: 0.4}, {Category: "gc", Fraction: 0.2}}}},
		{Flavour: deployed.K1m, Nodes: 1000, Round: 1, JoinProfile: &JoinProfile{Error: "CPU profile from https://[::1]:6443/debug/pprof/profile: 404 Not Found"}},
		{Flavour: deployed.K1m, Nodes: 2000, Round: 1},
	}
	var b strings.Builder
	joinProfileMarkdown(&b, rows)
	want := "\nstock, 1000 nodes, round 1: the API server's process over the burst's first 15s, 12.34s of CPU sampled: etcd 40%, gc 20% (`join-1000.cpu.pprof`)\n" +
		"\nk1m, 1000 nodes, round 1: no join profile: CPU profile from https://[::1]:6443/debug/pprof/profile: 404 Not Found\n"
	if got := b.String(); got != want {
		t.Errorf("joinProfileMarkdown =\n%q\nwant\n%q", got, want)
	}
}

func TestJoinAtARateRegistersInOrderAndStartsEachNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	var created []string
	client.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		created = append(created, a.(k8stesting.CreateAction).GetObject().(*corev1.Node).Name)
		return false, nil, nil
	})
	sim, err := nodesim.New(&rest.Config{Host: "https://[::1]:1"}, nodesim.Defaults()) // not run: Add only counts
	if err != nil {
		t.Fatal(err)
	}
	nodes := &fleet{perClient: 100, clients: []kubernetes.Interface{client}, reports: make(chan *corev1.Pod, 1)}
	r := stepRun{from: 2, to: 5, sim: sim, nodes: nodes}
	if err := r.join(ctx, client, 1000); err != nil {
		t.Fatal(err)
	}
	if want := []string{"node-0000002", "node-0000003", "node-0000004"}; !slices.Equal(created, want) {
		t.Errorf("created %v, want %v", created, want)
	}
	if got := sim.Stats().Nodes; got != 5 {
		t.Errorf("simulated heartbeats of %d nodes, want 5", got)
	}
	if err := nodes.waitSynced(ctx, 3*int64(len(NodeWatches)), time.Minute); err != nil {
		t.Errorf("the three nodes' watches: %v", err)
	}
}

// A watch whose call fails (its server gone) comes back from the version
// it had, without a list, as client-go's reflector does; one whose
// version is gone (410) lists again. Each counts once as recovered.
func TestFollowResumesAfterAFailedWatchAndListsOnlyWhenTheVersionIsGone(t *testing.T) {
	for _, c := range []struct {
		name                string
		failure             error
		wantLists, wantBack int64
	}{
		{"server gone", errors.New("connection refused"), 1, 1},
		{"version gone", apierrors.NewResourceExpired("too old resource version"), 2, 1},
		{"version gone in the stream", nil, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			var lists, watches int
			var asked []string
			lw := listWatch{
				list: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					lists++
					return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(10 * lists)}}, nil
				},
				watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
					mu.Lock()
					defer mu.Unlock()
					watches++
					asked = append(asked, o.ResourceVersion)
					if watches == 2 && c.failure != nil {
						return nil, c.failure
					}
					w := watch.NewFake()
					switch watches {
					case 1:
						go w.Stop() // the first stream ends: the server went away
					case 2: // a new server that no longer has the version
						go func() {
							w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
							w.Stop()
						}()
					}
					return w, nil
				},
			}
			var f counts
			go f.follow(ctx, lw, nil)
			if err := waitListed(ctx, f.recovered.Load, 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := waitListed(ctx, func() int64 { mu.Lock(); defer mu.Unlock(); return int64(watches) }, 3, time.Minute); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if int64(lists) != c.wantLists || f.recovered.Load() != c.wantBack {
				t.Errorf("lists %d, recovered %d; want %d and %d (watches asked from %v)", lists, f.recovered.Load(), c.wantLists, c.wantBack, asked)
			}
		})
	}
}

// The routes' table has a row per join burst whose routes were written,
// none for a build that writes none.
func TestRoutedMarkdownIsARowPerRoutedBurst(t *testing.T) {
	rows := []Step{
		{Flavour: "k1m-route-events-2500", Round: 1, Nodes: 2000, JoinedNodes: 1000, Routed: 200 * time.Second,
			RouteProcesses: []Component{{Name: "k1m", Cores: 0.5}, {Name: "kubelet", Cores: 0.1}}, RouteLateHeartbeats: 3},
		{Flavour: "provider", Round: 1, Nodes: 2000, JoinedNodes: 1000},
	}
	var b strings.Builder
	routedMarkdown(&b, rows)
	want := "\nUntil every Node's pod route was written (the route publisher's pacing, `--pod-route-events-per-second`), from the burst's start:\n\n" +
		"| build | round | nodes joined (to) | seconds | server cores | CPU per node joined | late heartbeats |\n" +
		"|---|---:|---:|---:|---:|---:|---:|\n" +
		"| k1m-route-events-2500 | 1 | 1000 (2000) | 200.0 | 0.60 | 120ms | 3 |\n"
	if got := b.String(); got != want {
		t.Errorf("routedMarkdown =\n%s\nwant\n%s", got, want)
	}
	b.Reset()
	routedMarkdown(&b, rows[1:])
	if b.Len() != 0 {
		t.Errorf("with no route written: %q, want nothing", b.String())
	}
}

func TestListedCountAddsTheRemainingItems(t *testing.T) {
	left := int64(1999)
	if got := listedCount(1, &left); got != 2000 {
		t.Errorf("listedCount(1, 1999) = %d, want 2000", got)
	}
	if got := listedCount(0, nil); got != 0 {
		t.Errorf("listedCount(0, nil) = %d, want 0", got)
	}
}
