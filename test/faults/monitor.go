package faults

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/test/clustercheck"
)

// Monitor reads every Node's Ready condition and every node Lease
// through every API server, once per interval, and records the seconds
// each node was seen NotReady through a server that is not out, and a
// violation for each such second while a majority of the servers runs and
// the node is not excused (its own server out).
//
// Rate: per interval, one Node list and one Lease list through each
// server: 2 x servers lists a second, each of every node: a test tool for
// the campaign's 5 nodes, not for a large cluster (at 100,000 nodes that
// would be 600,000 objects read a second).
type Monitor struct {
	f      *Fixture
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu         sync.Mutex
	notReady   map[string]map[int64]bool // node -> unix seconds seen NotReady
	violations map[string]map[int64]bool // node -> unix seconds seen NotReady that should not have been
	first      map[string]sighting       // node -> the earliest sample that made a violation
	leaseAge   map[string]time.Duration  // node -> oldest renewTime seen while not excused
}

// StartMonitor starts reading through every server.
func StartMonitor(ctx context.Context, f *Fixture, interval time.Duration) *Monitor {
	ctx, cancel := context.WithCancel(ctx)
	m := &Monitor{f: f, cancel: cancel, notReady: map[string]map[int64]bool{},
		violations: map[string]map[int64]bool{}, first: map[string]sighting{}, leaseAge: map[string]time.Duration{}}
	for i := 1; i <= Servers; i++ {
		m.done.Add(1)
		go func() {
			defer m.done.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				m.sample(ctx, i)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	return m
}

// sample reads Nodes and Leases through server i once.
func (m *Monitor) sample(ctx context.Context, i int) {
	v := m.f.now()
	if !v.trusted[i] {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	client := m.f.Client(i)
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	at := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range nodes.Items {
		if clustercheck.Ready(&n) {
			continue
		}
		mark(m.notReady, n.Name, at.Unix(), true)
		if v.majority && !v.excused[n.Name] {
			mark(m.violations, n.Name, at.Unix(), true)
			// Servers sample at once: keep the earliest, whichever locks first.
			if f, seen := m.first[n.Name]; !seen || at.Before(f.at) {
				m.first[n.Name] = sighting{at: at, server: i, ready: readyCondition(&n)}
			}
		}
	}
	leases, err := client.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, l := range leases.Items {
		if l.Spec.RenewTime == nil || v.excused[l.Name] {
			continue
		}
		m.leaseAge[l.Name] = max(m.leaseAge[l.Name], at.Sub(l.Spec.RenewTime.Time))
	}
}

func mark(set map[string]map[int64]bool, node string, second int64, v bool) {
	if set[node] == nil {
		set[node] = map[int64]bool{}
	}
	set[node][second] = v
}

// MonitorReport is what the monitor saw.
type MonitorReport struct {
	// NotReadySeconds is, per node seen NotReady, for how many seconds.
	NotReadySeconds map[string]int
	// Violations: nodes NotReady while they should not have been, one
	// line per node with its seconds (first and last) and the server.
	Violations []string
	// OldestLease is, per node, the oldest Lease renewal seen while the
	// node was not excused.
	OldestLease map[string]time.Duration
}

// Stop stops the monitor and reports.
func (m *Monitor) Stop() MonitorReport {
	m.cancel()
	m.done.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := MonitorReport{NotReadySeconds: map[string]int{}, OldestLease: map[string]time.Duration{}}
	for node, seconds := range m.notReady {
		r.NotReadySeconds[node] = len(seconds)
	}
	for node, seconds := range m.violations {
		r.Violations = append(r.Violations, violation(node, seconds, m.first[node]))
	}
	sort.Strings(r.Violations)
	for node, age := range m.leaseAge {
		r.OldestLease[node] = age.Round(time.Second)
	}
	return r
}

// readyCondition names who set the node's Ready condition and why: the
// kubelet's own reasons (a runtime or PLEG check) differ from the node
// controller's "Kubelet stopped posting node status.".
func readyCondition(n *corev1.Node) string {
	cond := clustercheck.ReadyCondition(n)
	if cond == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
}

// sighting is one sample that saw a node NotReady.
type sighting struct {
	at     time.Time
	server int    // through which server
	ready  string // the node's Ready condition (readyCondition)
}

// violation says for how long node was NotReady when it should not have
// been, and through which server and with which Ready condition it was
// first seen so.
func violation(node string, seconds map[int64]bool, first sighting) string {
	var all []int64
	for s := range seconds {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return fmt.Sprintf("node %s NotReady for %d s (%s to %s UTC, first seen through server %d: %s) while a majority of the servers ran and its own server was not out",
		node, len(all), clock(all[0]), clock(all[len(all)-1]), first.server, first.ready)
}

func clock(unix int64) string { return time.Unix(unix, 0).UTC().Format("15:04:05") }
