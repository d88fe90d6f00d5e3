// Package proxymode measures kube-proxy's iptables and nftables modes at
// many Services, the figure k1m's default mode is chosen by. A fresh
// one-server cluster per mode; at each step, selectorless Services are
// created up to its count, each with an EndpointSlice of two ready
// endpoints (written here as the EndpointSlice controller writes them,
// with the trigger-time annotation kube-proxy measures network
// programming from). Once kube-proxy has nothing pending, the slices are
// changed at a steady pace over a window, and kube-proxy's own metrics
// give the network programming latency (upstream's SLI: from the change
// to the rules in place), each sync's duration, and its process gives
// the CPU.
package proxymode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/poll"
)

// Modes, in the order the first round takes them.
var Modes = []string{constants.ProxyModeIPTables, constants.ProxyModeNFTables}

// Defaults: the two sizes, changes at 10 a second for 30 s.
var DefaultSteps = []int{1000, 10000}

const (
	DefaultChangeRate = 10
	DefaultWindow     = 30 * time.Second
	// Namespace holds the Services.
	Namespace = "k1m-bench-proxy"
	// createWorkers create the Services and slices.
	createWorkers = 50
	// SyncTimeout bounds the wait for kube-proxy to have nothing pending.
	SyncTimeout = 10 * time.Minute
)

// Config is the scenario's size.
type Config struct {
	Steps      []int   // Service counts, ascending
	ChangeRate float64 // EndpointSlice changes a second over the window
	Window     time.Duration
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	errs := []error{stats.CheckAscending("--proxy-services", "Service counts", "1000,10000", c.Steps)}
	if c.ChangeRate <= 0 {
		errs = append(errs, fmt.Errorf("--proxy-change-rate %v: want changes a second above 0, e.g. %d", c.ChangeRate, DefaultChangeRate))
	}
	if c.Window < time.Second {
		errs = append(errs, fmt.Errorf("--proxy-window %v: want at least 1s, e.g. %v", c.Window, DefaultWindow))
	}
	return errors.Join(errs...)
}

// Step is one Service count's window in one mode.
type Step struct {
	Mode     string
	Round    int
	Services int
	Created  time.Duration // creating the step's Services and slices
	// CaughtUp is from the last create until kube-proxy had nothing
	// pending: the first programming of the step's Services.
	CaughtUp    time.Duration
	Changes     int
	Window      time.Duration
	Programming stats.Latency // from each change to its rules in place (kube-proxy's histogram)
	SyncP50     time.Duration
	SyncP99     time.Duration
	Syncs       int
	ProxyCores  float64 // kube-proxy's process over the window
}

// CPUPerChange is kube-proxy's CPU per EndpointSlice change, in ms.
func (s Step) CPUPerChange() float64 {
	return stats.Per(s.ProxyCores*s.Window.Seconds()*1000, int64(s.Changes))
}

// Line is a step's one-line summary.
func (s Step) Line() string {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%d Services: programmed in p50 %v / p99 %v, sync p50 %v / p99 %v (%d syncs), kube-proxy %.3f cores (%.1f CPU-ms per change), first programming %v after the last create",
		s.Services, ms(s.Programming.P50), ms(s.Programming.P99), ms(s.SyncP50), ms(s.SyncP99), s.Syncs, s.ProxyCores, s.CPUPerChange(), s.CaughtUp.Round(100*time.Millisecond))
}

// Env is the cluster a run measures.
type Env struct {
	Client     kubernetes.Interface
	ProxyPID   int    // kube-proxy's process
	ProxyURL   string // its metrics, e.g. http://[::1]:10249/metrics
	Progress   func(string)
	HTTPClient *http.Client
}

// Run measures every step of cfg in one mode's cluster.
func Run(ctx context.Context, cfg Config, env Env) ([]Step, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	var steps []Step
	created := 0
	for _, n := range cfg.Steps {
		s, err := step(ctx, cfg, env, created, n)
		created = n
		if err != nil {
			return steps, fmt.Errorf("%d Services: %w", n, err)
		}
		env.Progress(s.Line())
		steps = append(steps, s)
	}
	return steps, nil
}

func step(ctx context.Context, cfg Config, env Env, from, to int) (Step, error) {
	s := Step{Services: to}
	env.Progress(fmt.Sprintf("%d Services: creating %d to %d, each with an EndpointSlice of 2 endpoints", to, from+1, to))
	start := time.Now()
	err := leaseflood.InParallel(to-from, createWorkers, func(k int) error { return createService(ctx, env.Client, from+k) })
	if err != nil {
		return s, err
	}
	s.Created = time.Since(start)
	start = time.Now()
	if err := waitNothingPending(ctx, env); err != nil {
		return s, err
	}
	s.CaughtUp = time.Since(start)
	before, err := scrape(ctx, env)
	if err != nil {
		return s, err
	}
	cpu0, err := proc.ReadUsage(env.ProxyPID)
	if err != nil {
		return s, fmt.Errorf("kube-proxy's CPU: %w", err)
	}
	start = time.Now()
	if s.Changes, err = churn(ctx, env.Client, to, cfg); err != nil {
		return s, err
	}
	if err := waitNothingPending(ctx, env); err != nil {
		return s, err
	}
	// One more sync period, so that the last change's programming is in
	// the histogram (kube-proxy observes it after the sync that applied it).
	if err := clock.Sleep(ctx, 2*time.Second); err != nil {
		return s, err
	}
	s.Window = time.Since(start)
	cpu1, err := proc.ReadUsage(env.ProxyPID)
	if err != nil {
		return s, fmt.Errorf("kube-proxy's CPU: %w", err)
	}
	after, err := scrape(ctx, env)
	if err != nil {
		return s, err
	}
	s.ProxyCores = cpu1.Sub(cpu0).CPU.Seconds() / s.Window.Seconds()
	s.fill(before, after)
	return s, nil
}

// fill reads the window's programming and sync histograms.
func (s *Step) fill(before, after apimetrics.Snapshot) {
	quantile := func(name string, q float64) time.Duration {
		d := stats.SubBuckets(after.Histogram(name), before.Histogram(name))
		return time.Duration(stats.HistogramQuantile(q, d) * float64(time.Second))
	}
	const programming = "kubeproxy_network_programming_duration_seconds"
	const sync = "kubeproxy_sync_proxy_rules_duration_seconds"
	s.Programming = stats.Latency{Count: int(count(after, programming) - count(before, programming)),
		P50: quantile(programming, 0.5), P90: quantile(programming, 0.9), P99: quantile(programming, 0.99)}
	s.SyncP50, s.SyncP99 = quantile(sync, 0.5), quantile(sync, 0.99)
	s.Syncs = int(count(after, sync) - count(before, sync))
}

// count is a histogram's observations (its +Inf bucket).
func count(m apimetrics.Snapshot, name string) float64 {
	n := 0.0
	for _, b := range m.Histogram(name) {
		n = max(n, b.Count)
	}
	return n
}

func scrape(ctx context.Context, env Env) (apimetrics.Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.ProxyURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := env.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading kube-proxy's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading kube-proxy's metrics at %s: %s, %v", env.ProxyURL, resp.Status, err)
	}
	return apimetrics.Parse(string(body))
}

// waitNothingPending waits until kube-proxy has no Service or endpoint
// change left to apply.
func waitNothingPending(ctx context.Context, env Env) error {
	return poll.Until(ctx, 200*time.Millisecond, SyncTimeout, "kube-proxy has no change pending", func(ctx context.Context) error {
		m, err := scrape(ctx, env)
		if err != nil {
			return err
		}
		eps, svcs := m.Sum("kubeproxy_sync_proxy_rules_endpoint_changes_pending"), m.Sum("kubeproxy_sync_proxy_rules_service_changes_pending")
		if eps+svcs > 0 {
			return fmt.Errorf("%v endpoint and %v Service changes pending", eps, svcs)
		}
		return nil
	})
}

// ServiceName is Service i's name; its EndpointSlice is ServiceName(i)+"-1".
func ServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// endpointBase is where the endpoints' addresses come from (nothing
// answers there: kube-proxy programs rules, it does not connect).
var endpointBase = netip.MustParseAddr("fd00:30::")

// endpointAddr is address k of Service i's endpoints, version v of them.
func endpointAddr(i, k, v int) string {
	a := endpointBase.As16()
	a[10], a[11] = byte(v>>8), byte(v)
	a[12], a[13], a[14], a[15] = byte(i>>16), byte(i>>8), byte(i), byte(k)
	return netip.AddrFrom16(a).String()
}

func createService(ctx context.Context, client kubernetes.Interface, i int) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ServiceName(i), Namespace: Namespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if _, err := client.CoreV1().Services(Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Service %s: %w", svc.Name, err)
	}
	slice := NewSlice(i, 0, time.Now())
	if _, err := client.DiscoveryV1().EndpointSlices(Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating EndpointSlice %s: %w", slice.Name, err)
	}
	return nil
}

// managedBy marks the slices as another controller's than the
// EndpointSlice controller, which leaves them alone (their Services have
// no selector anyway).
const managedBy = "k1m-bench"

// NewSlice is version v of Service i's EndpointSlice: two ready
// endpoints on port 80, changed at changed.
func NewSlice(i, v int, changed time.Time) *discoveryv1.EndpointSlice {
	ready, port, name := true, int32(80), "http"
	var endpoints []discoveryv1.Endpoint
	for k := 1; k <= 2; k++ {
		endpoints = append(endpoints, discoveryv1.Endpoint{Addresses: []string{endpointAddr(i, k, v)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(i) + "-1", Namespace: Namespace,
			Labels:      map[string]string{discoveryv1.LabelServiceName: ServiceName(i), discoveryv1.LabelManagedBy: managedBy},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: changed.UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Endpoints:   endpoints,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
}

// churn changes one Service's endpoints at a time, Services taken in
// turn, at cfg.ChangeRate a second over cfg.Window; it returns the changes
// made.
func churn(ctx context.Context, client kubernetes.Interface, services int, cfg Config) (int, error) {
	changes := int(cfg.ChangeRate * cfg.Window.Seconds())
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.ChangeRate))
	defer tick.Stop()
	slices := client.DiscoveryV1().EndpointSlices(Namespace)
	for c := 0; c < changes; c++ {
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-tick.C:
		}
		i := (c * 7919) % services // spread over the Services
		if _, err := slices.Update(ctx, NewSlice(i, c+1, time.Now()), metav1.UpdateOptions{}); err != nil {
			return c, fmt.Errorf("changing EndpointSlice %s-1: %w", ServiceName(i), err)
		}
	}
	return changes, nil
}
