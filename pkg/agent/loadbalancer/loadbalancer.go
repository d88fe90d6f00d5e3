// Package loadbalancer is the agent's client-side load balancer (k3s's
// pkg/agent/loadbalancer is the model; this is k1m's own code): a TCP
// proxy on [::1] that the node's kubelet and kube-proxy use instead of
// --server. It forwards each connection to one healthy kube-apiserver, so
// a node keeps renewing its Lease when its server dies, and nodes spread
// their load over every API server.
//
// Pass-through only: TLS runs end to end between the client and
// kube-apiserver, which therefore sees the client's own certificate. The
// clients name https://[::1]:PORT, and that verifies because every
// kube-apiserver serving certificate carries ::1 as a SAN: the server's own
// components use https://[::1]:6443 (pkg/server/pki.go, apiserverNames:
// net.IPv6loopback is always among the IPs).
//
// The server list starts with --server's host:port (or, after a restart,
// the list the agent saved last), then follows the kubernetes Service's
// EndpointSlices (Follow). Each agent orders the servers by rendezvous
// hashing of its node name (Order): the first is its preferred server, the
// others its fail-over order, which differs from node to node so that a
// dead server's nodes spread over the others.
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"k1m.dev/k1m/pkg/constants"
)

// Defaults of Config's timings.
const (
	// DefaultDialTimeout bounds a connection to a server and a health
	// check: on a LAN a live kube-apiserver accepts in milliseconds.
	DefaultDialTimeout = 2 * time.Second
	// DefaultCheckInterval is how often the servers that matter are
	// checked (see Config.Check), give or take the jitter. With the dial
	// timeout, a node notices a silently dead server within 10 s, well
	// inside a lease duration (40 s by default, 4 renew intervals).
	DefaultCheckInterval = 5 * time.Second
	// DefaultRebalanceDelay bounds the random delay before connections
	// move to a node's new preferred server after the list changed (a
	// server added, the join's --server replaced by the cluster's list):
	// the nodes that move do not all re-list at the same moment.
	DefaultRebalanceDelay = 30 * time.Second
	// checkJitter spreads the checks: each wait is CheckInterval times 1
	// to 1+checkJitter.
	checkJitter = 0.5
)

// Config sets up a LoadBalancer.
type Config struct {
	// Server is the agent's --server URL: its host:port is the first
	// server, and stays the last resort (see Update).
	Server string
	// NodeName decides this node's preference order (Order).
	NodeName string
	// StateFile keeps the last server list the cluster published, so that
	// an agent restarted while its --server is gone reaches a live one.
	// Empty: nothing is kept.
	StateFile string
	// Listen is the address to listen on; default
	// [::1]:constants.AgentLoadBalancerPort.
	Listen string
	// Report receives progress lines ("load balancer: ..."), each once
	// when something changed; nil discards them.
	Report func(string)
	// Timings; zero means the default above.
	DialTimeout, CheckInterval, RebalanceDelay time.Duration
	// Check tells whether a server is up; default: a TCP connection within
	// DialTimeout. Not kube-apiserver's /readyz, although k1m's
	// kube-apiserver lets anonymous clients read it
	// (system:public-info-viewer; docs/security.md): that costs a TLS
	// handshake per check, and at a million nodes checking every 5 s that
	// is 200,000 handshakes a second spread over the servers, for little
	// more than the TCP check tells (a draining kube-apiserver closes its
	// connections and removes itself from the kubernetes endpoints).
	Check func(ctx context.Context, address string) error
}

// LoadBalancer is a running balancer; it stops when the context given to
// Start ends, or at Close.
type LoadBalancer struct {
	cfg      Config
	fallback string // --server's host:port
	listener net.Listener
	dialer   net.Dialer
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	servers  []string            // the list, sorted
	order    []string            // preference order; the fallback last when not listed
	backends map[string]*backend // one per address of order
	// generation counts list changes: a rebalance scheduled for an older
	// list does nothing.
	generation int

	updateMu sync.Mutex

	reportMu sync.Mutex
	reported string
}

// backend is one server and the connections open through it.
type backend struct {
	address string
	healthy bool
	conns   map[*proxied]struct{}
}

// proxied is one client connection and its server side.
type proxied struct{ client, server net.Conn }

func (p *proxied) close() {
	p.client.Close()
	p.server.Close()
}

// ServerAddress is the host:port of an https server URL (port 443 when it
// names none): what the balancer dials for --server.
func ServerAddress(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.Path != "" && u.Path != "/" {
		return "", fmt.Errorf("server URL %q: want https://HOST:PORT, e.g. https://[fddf:4035:b520::1]:6443", serverURL)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("server URL %q: port %q is not a TCP port", serverURL, port)
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// Start listens and balances until ctx ends. The first list is the one
// saved in StateFile, if any, else --server alone.
func Start(ctx context.Context, cfg Config) (*LoadBalancer, error) {
	fallback, err := ServerAddress(cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("load balancer: %w", err)
	}
	if cfg.Listen == "" {
		cfg.Listen = net.JoinHostPort("::1", strconv.Itoa(constants.AgentLoadBalancerPort))
	}
	if cfg.Report == nil {
		cfg.Report = func(string) {}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.RebalanceDelay <= 0 {
		cfg.RebalanceDelay = DefaultRebalanceDelay
	}
	lb := &LoadBalancer{cfg: cfg, fallback: fallback, dialer: net.Dialer{Timeout: cfg.DialTimeout}, backends: map[string]*backend{}}
	if lb.cfg.Check == nil {
		lb.cfg.Check = lb.dialCheck
	}
	initial := []string{fallback}
	if cfg.StateFile != "" {
		saved, err := readState(cfg.StateFile)
		switch {
		case err != nil:
			cfg.Report(fmt.Sprintf("load balancer: ignoring the saved server list: %v", err))
		case len(saved) > 0:
			initial = saved
			cfg.Report(fmt.Sprintf("load balancer: starting with the server list saved in %s", cfg.StateFile))
		}
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("load balancer: %w (is another k1m agent running on this machine?)", err)
	}
	lb.listener = l
	lb.ctx, lb.cancel = context.WithCancel(ctx)
	lb.setServers(normalize(initial))
	lb.report()
	lb.wg.Add(3)
	go func() { defer lb.wg.Done(); lb.serve() }()
	// Jittered (each wait 1 to 1.5 intervals): agents started together,
	// as after a lease profile change, do not check in step.
	go func() {
		defer lb.wg.Done()
		wait.JitterUntilWithContext(lb.ctx, lb.checkOnce, cfg.CheckInterval, checkJitter, true)
	}()
	go func() { defer lb.wg.Done(); <-lb.ctx.Done(); lb.shutdown() }()
	return lb, nil
}

// URL is the https URL clients use instead of --server.
func (lb *LoadBalancer) URL() string { return "https://" + lb.listener.Addr().String() }

// Close stops the balancer and closes every connection through it.
func (lb *LoadBalancer) Close() {
	lb.cancel()
	lb.wg.Wait()
	lb.updateMu.Lock() // an update in progress has saved its list
	lb.updateMu.Unlock()
}

func (lb *LoadBalancer) shutdown() {
	lb.listener.Close()
	lb.mu.Lock()
	var all []*proxied
	for _, b := range lb.backends {
		all = append(all, b.take()...)
	}
	lb.mu.Unlock()
	for _, p := range all {
		p.close()
	}
}

// Servers is the current list, sorted.
func (lb *LoadBalancer) Servers() []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return slices.Clone(lb.servers)
}

// normalize sorts and deduplicates addresses and drops empty ones.
func normalize(addresses []string) []string {
	out := slices.DeleteFunc(slices.Clone(addresses), func(a string) bool { return a == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// Update replaces the server list (the kubernetes endpoints, host:port
// each). An empty list is ignored: the servers known so far are better
// than none. The --server address stays reachable as the last resort
// when the list does not hold it (a DNS name or a virtual IP in front of
// the servers, or the endpoints' addresses unreachable from this node),
// tried after every healthy listed server; it takes no part in the spread.
// A changed list is saved to StateFile; connections through servers no
// longer listed are closed at once, and those through servers that are
// not this node's preferred one move there after a random delay of up to
// RebalanceDelay.
func (lb *LoadBalancer) Update(addresses []string) {
	list := normalize(addresses)
	if len(list) == 0 {
		return
	}
	// One update at a time, so that the file saves the last list.
	lb.updateMu.Lock()
	defer lb.updateMu.Unlock()
	if lb.ctx.Err() != nil {
		return
	}
	lb.mu.Lock()
	if slices.Equal(list, lb.servers) {
		lb.mu.Unlock()
		return
	}
	removed := lb.setServers(list)
	lb.generation++
	generation := lb.generation
	lb.mu.Unlock()
	for _, p := range removed {
		p.close()
	}
	if lb.cfg.StateFile != "" {
		if err := writeState(lb.cfg.StateFile, list); err != nil {
			lb.cfg.Report(fmt.Sprintf("load balancer: could not save the server list: %v", err))
		}
	}
	lb.report()
	time.AfterFunc(rand.N(lb.cfg.RebalanceDelay), func() { lb.rebalance(generation) })
}

// setServers installs list (normalized) and returns the connections of
// the servers it drops. Called with mu held.
func (lb *LoadBalancer) setServers(list []string) []*proxied {
	lb.servers = list
	lb.order = Order(lb.cfg.NodeName, list)
	if !slices.Contains(list, lb.fallback) {
		lb.order = append(lb.order, lb.fallback)
	}
	var removed []*proxied
	for addr, b := range lb.backends {
		if !slices.Contains(lb.order, addr) {
			removed = append(removed, b.take()...)
			delete(lb.backends, addr)
		}
	}
	for _, addr := range lb.order {
		if lb.backends[addr] == nil {
			// Healthy until a dial or a check says otherwise.
			lb.backends[addr] = &backend{address: addr, healthy: true, conns: map[*proxied]struct{}{}}
		}
	}
	return removed
}

// take removes and returns every connection of b.
func (b *backend) take() []*proxied {
	all := make([]*proxied, 0, len(b.conns))
	for p := range b.conns {
		all = append(all, p)
	}
	clear(b.conns)
	return all
}

// candidates is the order in which a new connection tries the servers:
// the healthy ones in preference order, then the others (a check may be
// wrong, and trying beats refusing).
func (lb *LoadBalancer) candidates() []*backend {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var healthy, unhealthy []*backend
	for _, addr := range lb.order {
		if b := lb.backends[addr]; b.healthy {
			healthy = append(healthy, b)
		} else {
			unhealthy = append(unhealthy, b)
		}
	}
	return append(healthy, unhealthy...)
}

func (lb *LoadBalancer) serve() {
	for {
		c, err := lb.listener.Accept()
		if err != nil {
			if lb.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of file descriptors and the like: wait, and go on.
			select {
			case <-lb.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		lb.wg.Add(1)
		go func() { defer lb.wg.Done(); lb.handle(c) }()
	}
}

// handle forwards one client connection to the first server that answers.
func (lb *LoadBalancer) handle(client net.Conn) {
	for _, b := range lb.candidates() {
		server, err := lb.dialer.DialContext(lb.ctx, "tcp", b.address)
		if err != nil {
			if lb.ctx.Err() != nil {
				break
			}
			lb.setHealth(b, err)
			continue
		}
		lb.setHealth(b, nil)
		p := &proxied{client: client, server: server}
		if !lb.register(b, p) {
			break // b left the list meanwhile: the client reconnects
		}
		pipe(client, server)
		lb.unregister(b, p)
		return
	}
	client.Close()
}

func (lb *LoadBalancer) register(b *backend, p *proxied) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.backends[b.address] != b || lb.ctx.Err() != nil {
		p.close()
		return false
	}
	b.conns[p] = struct{}{}
	return true
}

func (lb *LoadBalancer) unregister(b *backend, p *proxied) {
	lb.mu.Lock()
	delete(b.conns, p)
	lb.mu.Unlock()
}

// pipe copies both ways until either side ends, then closes both (HTTP
// and TLS need no half-closed connections).
func pipe(client, server net.Conn) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(server, client); done <- struct{}{} }()
	go func() { io.Copy(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	<-done
}

// setHealth records the outcome of a dial or a check (err nil: up). A
// server that goes down has its connections closed at once: clients
// (the kubelet's HTTP/2 connection above all) would otherwise wait for TCP
// to time out, and they reconnect through the balancer to the next
// server instead.
func (lb *LoadBalancer) setHealth(b *backend, err error) {
	lb.mu.Lock()
	if lb.backends[b.address] != b || b.healthy == (err == nil) {
		lb.mu.Unlock()
		return
	}
	b.healthy = err == nil
	var closing []*proxied
	if err != nil {
		closing = b.take()
	}
	lb.mu.Unlock()
	if err != nil {
		lb.cfg.Report(fmt.Sprintf("load balancer: server %s is down (%v): closing its %d connections", b.address, err, len(closing)))
		for _, p := range closing {
			p.close()
		}
	} else {
		lb.cfg.Report(fmt.Sprintf("load balancer: server %s is up again", b.address))
	}
	lb.report()
}

// checkOnce checks, at the same time, each server that is down (to see
// it come back) and each that carries connections (to close them as soon
// as it dies). An idle healthy server is left alone: a dial to it finds
// out. Each node thus checks about one server per interval.
func (lb *LoadBalancer) checkOnce(ctx context.Context) {
	lb.mu.Lock()
	var due []*backend
	for _, addr := range lb.order {
		if b := lb.backends[addr]; !b.healthy || len(b.conns) > 0 {
			due = append(due, b)
		}
	}
	lb.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := lb.check(ctx, b.address)
			if ctx.Err() == nil {
				lb.setHealth(b, err)
			}
		}()
	}
	wg.Wait()
}

func (lb *LoadBalancer) check(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, lb.cfg.DialTimeout)
	defer cancel()
	return lb.cfg.Check(ctx, address)
}

// dialCheck is the default health check: a TCP connection, closed at once.
func (lb *LoadBalancer) dialCheck(ctx context.Context, address string) error {
	c, err := lb.dialer.DialContext(ctx, "tcp", address)
	if err != nil {
		return err
	}
	return c.Close()
}

// rebalance moves the connections open through other servers to the one
// new connections go to (checked first), unless the list changed again
// since generation (a later rebalance is due).
func (lb *LoadBalancer) rebalance(generation int) {
	target := lb.target()
	if target == nil || lb.ctx.Err() != nil {
		return
	}
	if err := lb.check(lb.ctx, target.address); err != nil {
		if lb.ctx.Err() == nil {
			lb.setHealth(target, err)
		}
		return
	}
	lb.mu.Lock()
	if generation != lb.generation || lb.ctx.Err() != nil || lb.backends[target.address] != target || !target.healthy {
		lb.mu.Unlock()
		return
	}
	var moving []*proxied
	var from []string
	for _, addr := range lb.order {
		if b := lb.backends[addr]; b != target && len(b.conns) > 0 {
			moving = append(moving, b.take()...)
			from = append(from, addr)
		}
	}
	lb.mu.Unlock()
	if len(moving) == 0 {
		return
	}
	lb.cfg.Report(fmt.Sprintf("load balancer: moving %d connections from %s to %s", len(moving), strings.Join(from, " "), target.address))
	for _, p := range moving {
		p.close()
	}
}

// target is the server new connections go to: the first healthy one in
// preference order (nil when none is).
func (lb *LoadBalancer) target() *backend {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, addr := range lb.order {
		if b := lb.backends[addr]; b.healthy {
			return b
		}
	}
	return nil
}

// status is the one-line summary reported whenever it changes.
func (lb *LoadBalancer) status() string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "load balancer: servers [%s] (preferred %s", strings.Join(lb.servers, " "), lb.order[0])
	var down []string
	target := ""
	for _, addr := range lb.order {
		switch be := lb.backends[addr]; {
		case !be.healthy:
			down = append(down, addr)
		case target == "":
			target = addr
		}
	}
	if len(down) > 0 {
		fmt.Fprintf(&b, "; down: %s", strings.Join(down, " "))
	}
	switch {
	case target == "":
		b.WriteString("; none answers: each is tried in turn")
	case target != lb.order[0]:
		fmt.Fprintf(&b, "; new connections go to %s", target)
	}
	b.WriteString(")")
	return b.String()
}

// report sends the status line when it differs from the last one sent.
func (lb *LoadBalancer) report() {
	lb.reportMu.Lock()
	defer lb.reportMu.Unlock()
	if s := lb.status(); s != lb.reported {
		lb.reported = s
		lb.cfg.Report(s)
	}
}
