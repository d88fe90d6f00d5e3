// Package kubeletsim serves the kubelet's resource metrics endpoint
// (/metrics/resource, what metrics-server scrapes) for many simulated
// nodes from one process. Every node has a port of its own on one
// address, which its Node object advertises as its kubelet endpoint
// (status.daemonEndpoints.kubeletEndpoint.port), so metrics-server
// started with --kubelet-use-node-status-port reaches each node's
// endpoint as it reaches a kubelet. The endpoints serve TLS with one
// certificate for the address, signed by the cluster's kubelet serving
// CA, so metrics-server checks them as it checks real kubelets.
package kubeletsim

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k1m.dev/k1m/pkg/poll"
)

// Path is the kubelet's resource metrics endpoint.
const Path = "/metrics/resource"

// Config of the simulated endpoints.
type Config struct {
	Addr netip.Addr // every endpoint's address
	// FirstPort+i is node i's endpoint port; with FirstPort 0 every
	// endpoint takes a port the system picks.
	FirstPort   int
	PodsPerNode int // pods each node reports, one container each
}

// Validate names the field at fault.
func (c Config) Validate(nodes int) error {
	var errs []error
	if !c.Addr.IsValid() {
		errs = append(errs, errors.New("address: want the address the simulated kubelets serve on"))
	}
	if c.FirstPort != 0 && (c.FirstPort < 1024 || c.FirstPort+nodes > 65536) {
		errs = append(errs, fmt.Errorf("first port %d for %d nodes: want 0 (any) or ports from 1024 to 65535", c.FirstPort, nodes))
	}
	if c.PodsPerNode < 0 {
		errs = append(errs, fmt.Errorf("pods per node %d: want 0 or more", c.PodsPerNode))
	}
	return errors.Join(errs...)
}

// Endpoints are the simulated nodes' metrics endpoints.
type Endpoints struct {
	cfg     Config
	server  *http.Server
	start   time.Time
	mu      sync.Mutex
	scrapes []*atomic.Int64 // by node
	ports   []int           // by node
	nodes   map[int]int     // node by port
	stopped error           // the first endpoint's error that stopped it
}

// New serves no node yet; Add opens their endpoints.
func New(cfg Config, cert tls.Certificate) *Endpoints {
	e := &Endpoints{cfg: cfg, start: time.Now(), nodes: map[int]int{}}
	e.server = &http.Server{
		Handler:           http.HandlerFunc(e.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	return e
}

// Add opens the endpoints of nodes up to (not including) nodes.
func (e *Endpoints) Add(nodes int) error {
	if err := e.cfg.Validate(nodes); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.scrapes); i < nodes; i++ {
		port := 0
		if e.cfg.FirstPort != 0 {
			port = e.cfg.FirstPort + i
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(e.cfg.Addr.String(), strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("node %d's kubelet endpoint: %w", i, err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		e.ports, e.nodes[port] = append(e.ports, port), i
		e.scrapes = append(e.scrapes, new(atomic.Int64))
		go func() {
			if err := e.server.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				e.mu.Lock()
				e.stopped = cmp.Or(e.stopped, err)
				e.mu.Unlock()
			}
		}()
	}
	return nil
}

// Err is the first error an endpoint stopped on, nil while all serve.
func (e *Endpoints) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped
}

// Close stops every endpoint.
func (e *Endpoints) Close() error { return e.server.Close() }

// Scrapes is how many times each node's endpoint was scraped, by node.
func (e *Endpoints) Scrapes() []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]int64, len(e.scrapes))
	for i, n := range e.scrapes {
		out[i] = n.Load()
	}
	return out
}

// serve answers a scrape of the node whose port the request came in on.
func (e *Endpoints) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	node, scrapes, ok := e.nodeOf(r)
	if !ok {
		http.Error(w, "no simulated node on this port", http.StatusNotFound)
		return
	}
	scrapes.Add(1)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_ = Write(w, node, e.cfg.PodsPerNode, e.start, time.Now())
}

// nodeOf is the node whose endpoint r came to, and its scrape count.
func (e *Endpoints) nodeOf(r *http.Request) (int, *atomic.Int64, bool) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	tcp, ok := local.(*net.TCPAddr)
	if !ok {
		return 0, nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	node, ok := e.nodes[tcp.Port]
	if !ok {
		return 0, nil, false
	}
	return node, e.scrapes[node], true
}

// Port is node i's endpoint port, once Add opened it.
func (e *Endpoints) Port(i int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ports[i]
}

// Usage a simulated container and node report: each container uses
// ContainerCores since the endpoints started and holds ContainerBytes;
// the node, the sum of its pods' and NodeOverhead more.
const (
	ContainerCores = 0.01
	ContainerBytes = 50 << 20
	NodeOverhead   = 2
)

// PodName is node node's pod k.
func PodName(node, k int) string { return fmt.Sprintf("app-%07d-%03d", node, k) }

// PodNamespace holds the simulated pods.
const PodNamespace = "k1m-bench-metrics"

// Write writes node's resource metrics at now in the kubelet's
// form (its HELP and TYPE lines, series in its order, timestamps in
// milliseconds): cumulative CPU that grows with the time since start,
// working sets, container start times, swap and the scrape error gauge.
func Write(w io.Writer, node, pods int, start, now time.Time) error {
	ms := now.UnixMilli()
	up := now.Sub(start).Seconds() + 1 // never 0: metrics-server drops a 0 counter
	b := make([]byte, 0, 1024+pods*700)
	family := func(name, help, typ string) {
		b = fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	containers := func(name string, value func(k int) float64) {
		for k := 0; k < pods; k++ {
			b = fmt.Appendf(b, "%s{container=\"app\",namespace=%q,pod=%q} %s %d\n", name, PodNamespace, PodName(node, k), num(value(k)), ms)
		}
	}
	podSeries := func(name string, value float64) {
		for k := 0; k < pods; k++ {
			b = fmt.Appendf(b, "%s{namespace=%q,pod=%q} %s %d\n", name, PodNamespace, PodName(node, k), num(value), ms)
		}
	}
	cpu, bytes := ContainerCores*up, float64(ContainerBytes)
	family("container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds", "counter")
	containers("container_cpu_usage_seconds_total", func(int) float64 { return cpu })
	family("container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes", "gauge")
	containers("container_memory_working_set_bytes", func(int) float64 { return bytes })
	family("container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds", "gauge")
	containers("container_start_time_seconds", func(int) float64 { return float64(start.Unix()) })
	family("container_swap_usage_bytes", "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", "gauge")
	containers("container_swap_usage_bytes", func(int) float64 { return 0 })
	family("node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", "counter")
	b = fmt.Appendf(b, "node_cpu_usage_seconds_total %s %d\n", num(cpu*float64(pods)+NodeOverhead*ContainerCores*up), ms)
	family("node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", "gauge")
	b = fmt.Appendf(b, "node_memory_working_set_bytes %s %d\n", num(bytes*float64(pods+NodeOverhead)), ms)
	family("node_swap_usage_bytes", "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", "gauge")
	b = fmt.Appendf(b, "node_swap_usage_bytes 0 %d\n", ms)
	family("pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", "counter")
	podSeries("pod_cpu_usage_seconds_total", cpu)
	family("pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", "gauge")
	podSeries("pod_memory_working_set_bytes", bytes)
	family("pod_swap_usage_bytes", "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", "gauge")
	podSeries("pod_swap_usage_bytes", 0)
	family("resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", "gauge")
	b = append(b, "resource_scrape_error 0\n"...)
	_, err := w.Write(b)
	return err
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Wait waits until every node below nodes was scraped at least times
// times; its error says how many were.
func (e *Endpoints) Wait(ctx context.Context, nodes int, times int64, timeout time.Duration) error {
	what := fmt.Sprintf("every simulated node's kubelet endpoint scraped %d times", times)
	return poll.Until(ctx, 500*time.Millisecond, timeout, what, func(context.Context) error {
		if err := e.Err(); err != nil {
			return poll.Stop(fmt.Errorf("a simulated kubelet endpoint stopped: %w", err))
		}
		if done := ScrapedAtLeast(e.Scrapes(), nodes, times); done < nodes {
			return fmt.Errorf("%d of %d nodes were", done, nodes)
		}
		return nil
	})
}

// ScrapedAtLeast counts the nodes below nodes scraped at least times
// times.
func ScrapedAtLeast(scrapes []int64, nodes int, times int64) int {
	done := 0
	for i := 0; i < nodes && i < len(scrapes); i++ {
		if scrapes[i] >= times {
			done++
		}
	}
	return done
}
