// Package nodesim simulates the heartbeats of many kubelets and nothing
// else, so that a node ramp measures the control plane and not the
// simulator. Each node renews its Lease every renew interval as the
// kubelet's lease controller does (Update with the object the last call
// returned; Get, and Create when there is none, on the first renewal and
// after an error) and reports its status every status interval as the
// kubelet's tryUpdateNodeStatus does when nothing changed (Get from the
// API server's cache, strategic merge PATCH of nodes/status moving the
// heartbeats). It runs as a process of its own (`k1m-bench
// simulate-nodes`, see Serve and Start) in a CPU-capped cgroup, so its CPU
// is accounted apart from the control plane's.
package nodesim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/pkg/config"
)

// DefaultStatusInterval is the kubelet's nodeStatusReportFrequency: with
// node Leases, a node whose status did not change reports it this often.
const DefaultStatusInterval = 5 * time.Minute

// LateAfter is how long after it was due a heartbeat counts as late: the
// simulator (or the server) is not keeping up.
const LateAfter = time.Second

// Config of a simulator.
type Config struct {
	RenewInterval  time.Duration // Lease renewals
	LeaseDuration  time.Duration // the Leases' spec.leaseDurationSeconds
	StatusInterval time.Duration // node status reports
	Workers        int           // heartbeats in flight at most
	Clients        int           // connections the workers share
}

// Defaults are upstream's kubelet timings (10 s renewals, 40 s Leases,
// status every 5 minutes), 64 heartbeats in flight over 16 connections.
func Defaults() Config {
	return Config{RenewInterval: config.DefaultRenewInterval, LeaseDuration: 4 * config.DefaultRenewInterval,
		StatusInterval: DefaultStatusInterval, Workers: 64, Clients: 16}
}

// Validate checks c; errors name the simulate-nodes flag.
func (c Config) Validate() error {
	var errs []error
	if c.RenewInterval <= 0 {
		errs = append(errs, fmt.Errorf("--renew-interval %v: want more than 0, e.g. 10s", c.RenewInterval))
	}
	if c.LeaseDuration < time.Second || c.LeaseDuration%time.Second != 0 || c.LeaseDuration <= c.RenewInterval {
		errs = append(errs, fmt.Errorf("--lease-duration %v: want whole seconds longer than --renew-interval, e.g. 40s", c.LeaseDuration))
	}
	if c.StatusInterval <= 0 {
		errs = append(errs, fmt.Errorf("--status-interval %v: want more than 0, e.g. 5m (the kubelet's)", c.StatusInterval))
	}
	if c.Workers < 1 || c.Clients < 1 || c.Clients > c.Workers {
		errs = append(errs, fmt.Errorf("--workers %d, --clients %d: want at least one client and no more clients than workers", c.Workers, c.Clients))
	}
	return errors.Join(errs...)
}

// Stats are the simulator's counters since it started, but MaxLateness,
// which is since the previous Stats call.
type Stats struct {
	Nodes         int
	WithoutLease  int   // nodes whose first renewal has not succeeded yet
	Renewals      int64 // Lease renewals done (creates included)
	StatusUpdates int64
	Errors        int64
	Late          int64         // heartbeats started more than LateAfter after they were due
	MaxLateness   time.Duration // the latest start, against its due time, since the previous Stats
	LastError     string
}

// Sub is the counters between earlier and s (Nodes, MaxLateness and
// LastError are s's).
func (s Stats) Sub(earlier Stats) Stats {
	s.Renewals -= earlier.Renewals
	s.StatusUpdates -= earlier.StatusUpdates
	s.Errors -= earlier.Errors
	s.Late -= earlier.Late
	return s
}

type kind int

const (
	renewal kind = iota
	statusReport
)

// beat is one heartbeat a node owes at due.
type beat struct {
	due  time.Time
	node int
	kind kind
}

// schedule is a min-heap of beats by due time.
type schedule []beat

func (s schedule) Len() int           { return len(s) }
func (s schedule) Less(i, j int) bool { return s[i].due.Before(s[j].due) }
func (s schedule) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *schedule) Push(x any)        { *s = append(*s, x.(beat)) }
func (s *schedule) Pop() any {
	old := *s
	b := old[len(old)-1]
	*s = old[:len(old)-1]
	return b
}

// firstBeats are the first heartbeats of nodes from to to-1, added at
// now: renewals spread evenly over one renew interval and status reports
// at random over one status interval, as kubelets started at different
// times would send them.
func firstBeats(from, to int, now time.Time, c Config, rnd *rand.Rand) []beat {
	var out []beat
	n := to - from
	for k := 0; k < n; k++ {
		out = append(out, beat{due: now.Add(c.RenewInterval * time.Duration(k) / time.Duration(n)), node: from + k, kind: renewal})
		out = append(out, beat{due: now.Add(time.Duration(rnd.Int64N(int64(c.StatusInterval)))), node: from + k, kind: statusReport})
	}
	return out
}

// Simulator sends the heartbeats of its nodes until its context ends.
type Simulator struct {
	cfg     Config
	clients []kubernetes.Interface
	work    chan beat
	wake    chan struct{}

	mu     sync.Mutex
	queue  schedule
	leases []*coordinationv1.Lease // the last each node's renewal returned
	leased []bool                  // whether a node's Lease was ever created or found
	stats  Stats
	rnd    *rand.Rand
}

// New makes a simulator of no nodes; Add gives it some.
func New(restCfg *rest.Config, cfg Config) (*Simulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var clients []kubernetes.Interface
	for i := 0; i < cfg.Clients; i++ {
		c := rest.CopyConfig(restCfg)
		c.QPS, c.Burst = -1, 0 // kubelets each have their own limit; here the server is what limits
		client, err := kubernetes.NewForConfig(c)
		if err != nil {
			return nil, err
		}
		clients = append(clients, client)
	}
	return withClients(clients, cfg), nil
}

func withClients(clients []kubernetes.Interface, cfg Config) *Simulator {
	return &Simulator{cfg: cfg, clients: clients, work: make(chan beat), wake: make(chan struct{}, 1), rnd: rand.New(rand.NewPCG(1, 2))}
}

// Add makes the simulator the kubelet of Nodes 0 to nodes-1
// (leaseflood.ObjectName), which must exist; nodes it has already are
// kept on their rhythm.
func (s *Simulator) Add(nodes int) {
	s.mu.Lock()
	from := len(s.leases)
	if nodes > from {
		for _, b := range firstBeats(from, nodes, time.Now(), s.cfg, s.rnd) {
			heap.Push(&s.queue, b)
		}
		s.leases = append(s.leases, make([]*coordinationv1.Lease, nodes-from)...)
		s.leased = append(s.leased, make([]bool, nodes-from)...)
		s.stats.Nodes = nodes
		s.stats.WithoutLease += nodes - from
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counters and starts a new MaxLateness.
func (s *Simulator) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	s.stats.MaxLateness = 0
	return out
}

// Run dispatches heartbeats as they fall due to the workers until ctx
// ends. When every worker is busy a due beat waits: it is then late, and
// Stats says so.
func (s *Simulator) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := 0; w < s.cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.worker(ctx, s.clients[w%len(s.clients)])
		}()
	}
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		b, wait := s.next(time.Now())
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			case <-timer.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case s.work <- b:
		}
	}
}

// next pops the first beat if it is due by now; otherwise it says how
// long until it is (an hour when there is none: Add wakes the loop).
func (s *Simulator) next(now time.Time) (beat, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return beat{}, time.Hour
	}
	if wait := s.queue[0].due.Sub(now); wait > 0 {
		return beat{}, wait
	}
	return heap.Pop(&s.queue).(beat), 0
}

func (s *Simulator) worker(ctx context.Context, client kubernetes.Interface) {
	for {
		var b beat
		select {
		case <-ctx.Done():
			return
		case b = <-s.work:
		}
		start := time.Now()
		interval := s.cfg.RenewInterval
		var err error
		if b.kind == renewal {
			err = s.renew(ctx, client, b.node)
		} else {
			interval = s.cfg.StatusInterval
			err = reportStatus(ctx, client, leaseflood.ObjectName(b.node))
		}
		if ctx.Err() != nil {
			return
		}
		s.done(b, start, err, interval)
	}
}

// done counts the beat and schedules the node's next one an interval
// after this one ended, as the kubelet's loops wait an interval between
// syncs.
func (s *Simulator) done(b beat, start time.Time, err error, interval time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lateness := start.Sub(b.due)
	if lateness > LateAfter {
		s.stats.Late++
	}
	s.stats.MaxLateness = max(s.stats.MaxLateness, lateness)
	switch {
	case err != nil:
		s.stats.Errors++
		s.stats.LastError = err.Error()
	case b.kind == renewal:
		s.stats.Renewals++
	default:
		s.stats.StatusUpdates++
	}
	heap.Push(&s.queue, beat{due: time.Now().Add(interval), node: b.node, kind: b.kind})
	// The dispatcher may be sleeping until a later beat than this one.
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// renew is one sync of the kubelet's lease controller: Update from the
// Lease the last call returned, or (first time, or after a failure) Get,
// and Create when the Lease does not exist.
func (s *Simulator) renew(ctx context.Context, client kubernetes.Interface, node int) error {
	s.mu.Lock()
	last := s.leases[node]
	s.mu.Unlock()
	leases := client.CoordinationV1().Leases(leaseflood.Namespace)
	name := leaseflood.ObjectName(node)
	var got *coordinationv1.Lease
	var err error
	if last != nil {
		next := last.DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		next.Spec.RenewTime = &now
		got, err = leases.Update(ctx, next, metav1.UpdateOptions{})
	} else if got, err = leases.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		got, err = leases.Create(ctx, leaseflood.NewLease(name, int32(s.cfg.LeaseDuration/time.Second), time.Now()), metav1.CreateOptions{})
	}
	if err != nil {
		got = nil // the next renewal starts again from a Get
	}
	s.mu.Lock()
	if got != nil && !s.leased[node] {
		s.leased[node] = true
		s.stats.WithoutLease--
	}
	s.leases[node] = got
	s.mu.Unlock()
	return err
}

// reportStatus is the kubelet's status report when nothing but the
// heartbeat changed.
func reportStatus(ctx context.Context, client kubernetes.Interface, name string) error {
	nodes := client.CoreV1().Nodes()
	old, err := nodes.Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	patch, err := leaseflood.HeartbeatPatch(old, time.Now())
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
