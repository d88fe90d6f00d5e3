// Package leaseflood renews many Leases through kube-apiserver the way
// kubelets do (Update carrying the last resourceVersion, closed loop) while
// watchers follow them, and measures rate, latency and what the server
// spent per update. RunSpread spreads the clients over several API
// servers of one cluster.
package leaseflood

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	watchapi "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/clock"
)

// Namespace of node Leases.
const Namespace = "kube-node-lease"

// Config of one flood.
type Config struct {
	// Object is what is written: ObjectLease (the default when empty) or
	// ObjectNodeStatus.
	Object   string
	Leases   int           // objects renewed (Leases, or Nodes)
	Workers  int           // concurrent renewers, each owning Leases/Workers objects
	Watchers int           // watches on the Leases, as controllers hold
	Warmup   time.Duration // renewing before measuring
	Duration time.Duration // the measured window
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	switch {
	case c.Object != "" && !slices.Contains(Objects, c.Object):
		return fmt.Errorf("leaseflood: object %q: want one of %s", c.Object, strings.Join(Objects, ", "))
	case c.Leases < 1:
		return fmt.Errorf("--leases %d: want at least 1, e.g. 10000", c.Leases)
	case c.Workers < 1 || c.Workers > c.Leases:
		return fmt.Errorf("--workers %d: want 1 to --leases (%d), e.g. 64", c.Workers, c.Leases)
	case c.Watchers < 0:
		return fmt.Errorf("--watchers %d: want 0 or more, e.g. 8", c.Watchers)
	case c.Duration <= 0 || c.Warmup < 0:
		return fmt.Errorf("--duration %v / --warmup %v: want a positive duration and a warm-up >= 0, e.g. 30s and 10s", c.Duration, c.Warmup)
	}
	return nil
}

// Result of one flood against one variant.
type Result struct {
	Updates, Conflicts, Errors int64
	// UpdatesBy are the updates through each of Clients.Workers, in order
	// (the lease scenario's one API server: all of them).
	UpdatesBy       []int64
	Elapsed         time.Duration
	Rate            float64 // updates/s
	WatchEventRate  float64 // events/s received per watcher
	Latency         stats.Latency
	APIServer, Etcd proc.Usage // over the window (etcd: all members); Run only
}

// Servers are the processes whose cost is attributed to the updates.
type Servers struct {
	APIServer *proc.Process
	Etcd      []*proc.Process
	// CPUProfile, if set, is started when the window opens and given its
	// length (CPU profiles of the processes); Run waits for it.
	CPUProfile func(ctx context.Context, window time.Duration) error
}

// Clients says which API server each client of a flood talks to.
type Clients struct {
	// Workers: worker i renews through Workers[Spread(i, len(Workers))],
	// so the renewers are spread evenly over several API servers; the
	// Leases are created through Workers[0].
	Workers []*rest.Config
	// Watchers: watcher i follows the Leases through
	// Watchers[Spread(i, len(Watchers))].
	Watchers []*rest.Config
}

// Probe is called when the measured window opens and again when it
// closes: the caller reads there the counters of whatever processes it
// attributes the updates' cost to. An error ends the flood.
type Probe func() error

// Run creates the Leases, starts watchers and workers, warms up, measures
// for cfg.Duration and stops: every client through restCfg, the cost read
// from servers.
func Run(ctx context.Context, restCfg *rest.Config, servers Servers, cfg Config) (Result, error) {
	var edges [][2]proc.Usage
	profiled := make(chan error, 1)
	probe := func() error {
		u, err := usage(servers)
		edges = append(edges, u)
		if len(edges) == 1 && servers.CPUProfile != nil {
			go func() { profiled <- servers.CPUProfile(ctx, cfg.Duration) }()
		}
		return err
	}
	one := []*rest.Config{restCfg}
	r, err := RunSpread(ctx, Clients{Workers: one, Watchers: one}, cfg, probe)
	if servers.CPUProfile != nil && len(edges) > 0 {
		err = errors.Join(err, <-profiled)
	}
	if err != nil {
		return Result{}, err
	}
	r.APIServer, r.Etcd = edges[1][0].Sub(edges[0][0]), edges[1][1].Sub(edges[0][1])
	return r, nil
}

// RunSpread is Run with the renewers and the watchers spread over the API
// servers of clients; probe reads the cost at the window's edges.
func RunSpread(ctx context.Context, clients Clients, cfg Config, probe Probe) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if len(clients.Workers) == 0 || len(clients.Watchers) == 0 {
		return Result{}, fmt.Errorf("leaseflood: want at least one API server for the workers (%d given) and one for the watchers (%d given)", len(clients.Workers), len(clients.Watchers))
	}
	workers, err := newRenewers(ctx, clients.Workers, cfg)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var measuring atomic.Bool
	var watchEvents atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < cfg.Watchers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watch(ctx, clients.Watchers[Spread(i, len(clients.Watchers))], cfg.Object, &measuring, &watchEvents)
		}()
	}
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, &measuring)
		}()
	}

	clock.Sleep(ctx, cfg.Warmup)
	if err := probe(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	measuring.Store(true)
	clock.Sleep(ctx, cfg.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	err = probe()
	cancel()
	wg.Wait()
	if err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil && elapsed < cfg.Duration {
		return Result{}, ctx.Err()
	}
	return summarize(workers, len(clients.Workers), elapsed, watchEvents.Load(), cfg.Watchers), nil
}

// renewer is a client like one kubelet: it writes its objects in turn.
type renewer interface {
	run(ctx context.Context, measuring *atomic.Bool)
	// result: the latencies and counts over the window, and the index
	// of the config it wrote through.
	result() (latencies []time.Duration, conflicts, errors int64, via int)
}

// newRenewers creates the objects (through the first config) and the
// workers that write them.
func newRenewers(ctx context.Context, configs []*rest.Config, cfg Config) ([]renewer, error) {
	if cfg.Object == ObjectNodeStatus {
		names, err := createNodes(ctx, configs[0], cfg)
		if err != nil {
			return nil, err
		}
		return newNodeWorkers(configs, cfg.Workers, names)
	}
	leases, err := createLeases(ctx, configs[0], cfg)
	if err != nil {
		return nil, err
	}
	workers, err := newWorkers(configs, cfg.Workers, leases)
	out := make([]renewer, len(workers))
	for i, w := range workers {
		out[i] = w
	}
	return out, err
}

// newNodeWorkers makes n node status workers, each with its own
// connection, and deals the Nodes out.
func newNodeWorkers(configs []*rest.Config, n int, names []string) ([]renewer, error) {
	clients, err := workerClients(configs, n)
	if err != nil {
		return nil, err
	}
	workers := make([]*nodeWorker, n)
	for i, client := range clients {
		workers[i] = &nodeWorker{client: client, via: Spread(i, len(configs))}
	}
	for i, name := range names {
		w := workers[i%len(workers)]
		w.nodes = append(w.nodes, name)
	}
	out := make([]renewer, n)
	for i, w := range workers {
		out[i] = w
	}
	return out, nil
}

// Spread is the index of the config, of n, that client i (a worker or a
// watcher) goes through: round robin, so shares differ by one at most.
func Spread(i, n int) int { return i % n }

// workerClients are n clients, each with its own connection (like
// kubelets), client i to the API server Spread picks.
func workerClients(configs []*rest.Config, n int) ([]kubernetes.Interface, error) {
	clients := make([]kubernetes.Interface, n)
	for i := range clients {
		client, err := kubernetes.NewForConfig(configs[Spread(i, len(configs))])
		if err != nil {
			return nil, err
		}
		clients[i] = client
	}
	return clients, nil
}

// newWorkers makes n workers, each with its own connection to the API
// server Spread picks, and deals the Leases out.
func newWorkers(configs []*rest.Config, n int, leases []*coordinationv1.Lease) ([]*worker, error) {
	clients, err := workerClients(configs, n)
	if err != nil {
		return nil, err
	}
	workers := make([]*worker, n)
	for i, client := range clients {
		workers[i] = &worker{client: client.CoordinationV1().Leases(Namespace), via: Spread(i, len(configs))}
	}
	for i, l := range leases {
		w := workers[i%len(workers)]
		w.leases = append(w.leases, l)
	}
	return workers, nil
}

func summarize(workers []renewer, configs int, elapsed time.Duration, events int64, watchers int) Result {
	r := Result{Elapsed: elapsed, UpdatesBy: make([]int64, configs)}
	var latencies []time.Duration
	for _, w := range workers {
		lat, conflicts, errs, via := w.result()
		r.Updates += int64(len(lat))
		r.UpdatesBy[via] += int64(len(lat))
		r.Conflicts += conflicts
		r.Errors += errs
		latencies = append(latencies, lat...)
	}
	r.Rate = stats.Rate(r.Updates, elapsed)
	if watchers > 0 {
		r.WatchEventRate = stats.Rate(events, elapsed) / float64(watchers)
	}
	r.Latency = stats.Summarize(latencies)
	return r
}

// usage reads [apiserver, sum of etcd members].
func usage(s Servers) ([2]proc.Usage, error) {
	var out [2]proc.Usage
	a, err := s.APIServer.Usage()
	if err != nil {
		return out, err
	}
	out[0] = a
	for _, p := range s.Etcd {
		u, err := p.Usage()
		if err != nil {
			return out, err
		}
		out[1].CPU += u.CPU
		out[1].RSS += u.RSS
		out[1].PeakRSS += u.PeakRSS
		out[1].GCCPU += u.GCCPU
		out[1].GCs += u.GCs
	}
	return out, nil
}

type worker struct {
	client interface {
		Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
		Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	}
	via               int // index of the config it renews through
	leases            []*coordinationv1.Lease
	latencies         []time.Duration
	conflicts, errors int64
}

func (w *worker) result() ([]time.Duration, int64, int64, int) {
	return w.latencies, w.conflicts, w.errors, w.via
}

// run renews its Leases in turn until ctx ends, as a kubelet renews its
// one: set renewTime, Update with the object (and resourceVersion) the last
// call returned.
func (w *worker) run(ctx context.Context, measuring *atomic.Bool) {
	for i := 0; ctx.Err() == nil; i = (i + 1) % len(w.leases) {
		lease := w.leases[i]
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		start := time.Now()
		updated, err := w.client.Update(ctx, lease, metav1.UpdateOptions{})
		took := time.Since(start)
		if ctx.Err() != nil {
			return
		}
		on := measuring.Load()
		switch {
		case err == nil:
			w.leases[i] = updated
			if on {
				w.latencies = append(w.latencies, took)
			}
		case apierrors.IsConflict(err):
			if on {
				w.conflicts++
			}
			if fresh, err := w.client.Get(ctx, lease.Name, metav1.GetOptions{}); err == nil {
				w.leases[i] = fresh
			}
		default:
			if on {
				w.errors++
			}
		}
	}
}

// lister is what a watcher needs of a typed client.
type lister interface {
	List(context.Context, metav1.ListOptions) (string, error)
	Watch(context.Context, metav1.ListOptions) (watchapi.Interface, error)
}

type leaseLister struct{ c kubernetes.Interface }

func (l leaseLister) List(ctx context.Context, o metav1.ListOptions) (string, error) {
	list, err := l.c.CoordinationV1().Leases(Namespace).List(ctx, o)
	if err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}

func (l leaseLister) Watch(ctx context.Context, o metav1.ListOptions) (watchapi.Interface, error) {
	return l.c.CoordinationV1().Leases(Namespace).Watch(ctx, o)
}

type nodeLister struct{ c kubernetes.Interface }

func (l nodeLister) List(ctx context.Context, o metav1.ListOptions) (string, error) {
	list, err := l.c.CoreV1().Nodes().List(ctx, o)
	if err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}

func (l nodeLister) Watch(ctx context.Context, o metav1.ListOptions) (watchapi.Interface, error) {
	return l.c.CoreV1().Nodes().Watch(ctx, o)
}

// watch follows the objects like a controller's informer does, counting
// the writes (MODIFIED events) it receives. It resumes from the last
// resourceVersion seen, so a reconnect does not replay every object.
func watch(ctx context.Context, cfg *rest.Config, object string, measuring *atomic.Bool, events *atomic.Int64) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0 // a client timeout would cut the watch every 30 s
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	var objects lister = leaseLister{client}
	if object == ObjectNodeStatus {
		objects = nodeLister{client}
	}
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			if rv, err = objects.List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err != nil {
				clock.Sleep(ctx, time.Second)
				continue
			}
		}
		w, err := objects.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			rv = ""
			clock.Sleep(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if obj, ok := ev.Object.(metav1.Object); ok {
				rv = obj.GetResourceVersion()
			}
			if ev.Type == watchapi.Error {
				rv = "" // expired: list again
				break
			}
			if ev.Type == watchapi.Modified && measuring.Load() {
				events.Add(1)
			}
		}
		w.Stop()
	}
}

// createLeases makes cfg.Leases node Leases (or takes the existing ones).
func createLeases(ctx context.Context, cfg *rest.Config, c Config) ([]*coordinationv1.Lease, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	leases := make([]*coordinationv1.Lease, c.Leases)
	err = InParallel(c.Leases, c.Workers, func(i int) error {
		l, err := createLease(ctx, client, ObjectName(i))
		leases[i] = l
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating Leases: %w", err)
	}
	return leases, nil
}

// ObjectName is the name of the i-th Lease or Node of a flood.
func ObjectName(i int) string { return fmt.Sprintf("node-%07d", i) }

// InParallel calls do for 0 to n-1 from workers goroutines and returns the
// first error; after one, no goroutine takes another index.
func InParallel(n, workers int, do func(i int) error) error {
	errs := make(chan error, workers)
	var next atomic.Int64
	var failed atomic.Bool
	for w := 0; w < workers; w++ {
		go func() {
			for i := int(next.Add(1) - 1); i < n && !failed.Load(); i = int(next.Add(1) - 1) {
				if err := do(i); err != nil {
					failed.Store(true)
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func createLease(ctx context.Context, client kubernetes.Interface, name string) (*coordinationv1.Lease, error) {
	created, err := client.CoordinationV1().Leases(Namespace).Create(ctx, NewLease(name, 40, time.Now()), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return client.CoordinationV1().Leases(Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return created, err
}

// NewLease is node name's Lease as the kubelet's lease controller
// creates it: held by the node, acquired and renewed now.
func NewLease(name string, durationSeconds int32, now time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(durationSeconds),
			AcquireTime: &t, RenewTime: &t},
	}
}
