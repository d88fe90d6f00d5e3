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
// the list the agent saved last), then grows with the kubernetes
// Service's EndpointSlices (Follow): it keeps every server it has seen,
// and forgets one only when the cluster lists it as removed (SetRemoved,
// from kube-public/k1m-cluster). Each agent orders the servers by rendezvous
// hashing of its node name (Order): the first is its preferred server, the
// others its fail-over order, which differs from node to node so that a
// dead server's nodes spread over the others.
//
// The files, by concern:
//
//	loadbalancer.go  Config and its defaults; Start, Close; the status line it reports
//	proxy.go         accepting connections and forwarding each to a server (serve, handle, pipe)
//	servers.go       the servers known: --server's address, the list (Update, SetRemoved), the
//	                 order new connections try them in, moving connections to the preferred
//	                 one (rebalance)
//	order.go         each node's preference order over the servers (Order)
//	follow.go        updating the list from the cluster's EndpointSlices (Follow)
//	state.go         the list saved for the next start
//	health.go        the checks: which servers are up (checkOnce, setHealth), and the move back
//	                 to the preferred server when it returns
//	ready.go         the check of a server's readiness endpoint with the node's certificate
package loadbalancer

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"k1m.dev/k1m/pkg/constants"
)

// Defaults of Config's timings.
const (
	// DefaultDialTimeout bounds a connection to a server and a health
	// check: on a LAN a live kube-apiserver accepts in milliseconds.
	DefaultDialTimeout = 2 * time.Second
	// DefaultCheckInterval is how often the servers that matter are
	// checked (see Config.Ready), give or take the jitter. With the dial
	// timeout, a node notices a silently dead or unready server within
	// 8 s, well inside a lease duration (40 s by default, 4 renew
	// intervals).
	//
	// What the checks cost the cluster: an agent checks the server its
	// connections go through and each server it has down, one request
	// per interval each, on a kept-alive connection, answered from the
	// server's memory (pkg/readiness: no etcd, no kube-apiserver behind
	// it). In steady state that is 0.2 requests a second per node: 20,000
	// a second at 100,000 nodes, spread over the servers by the nodes'
	// preference orders (about 6,700 each of 3). A server that is down
	// or not ready is checked by every node: 20,000 a second at it (a
	// refused connection while it is down); when it comes back, each
	// node's first check is a TLS handshake, so 100,000 handshakes over
	// one interval, about as many as the kubelets' own reconnections.
	DefaultCheckInterval = 5 * time.Second
	// DefaultRebalanceDelay bounds the random delay before connections
	// move to a node's new preferred server after the list changed (a
	// server added, the join's --server replaced by the cluster's list):
	// the nodes that move do not all re-list at the same moment.
	DefaultRebalanceDelay = 30 * time.Second
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
	// Ready, when set, makes the check of each listed server a GET of
	// its readiness endpoint (constants.ServerReadyPort, pkg/readiness)
	// with the node's client certificate: 200 is up, anything else down.
	// Until the node has its certificate, and for --server's address
	// when the list does not hold it, the check is a TCP connection.
	Ready *ReadyCheck
}

// LoadBalancer is a running balancer; it stops when the context given to
// Start ends, or at Close.
type LoadBalancer struct {
	cfg      Config
	fallback string // --server's host:port
	listener net.Listener
	dialer   net.Dialer
	ready    *readyClient // nil: TCP checks only
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu sync.Mutex
	// servers is the list, sorted; provisional while it is --server alone
	// (no list saved), which the first endpoints replace.
	servers     []string
	provisional bool
	endpoints   []string            // the kubernetes endpoints last seen
	removed     []string            // the servers the cluster says were removed
	order       []string            // preference order; the fallback last when not listed
	backends    map[string]*backend // one per address of order
	// generation counts list changes: a rebalance scheduled for an older
	// list does nothing.
	generation int
	// rebalanceSpread is the cluster's (SetRebalanceSpread): rebalances
	// wait a random part of it when it is longer than RebalanceDelay.
	rebalanceSpread time.Duration

	updateMu sync.Mutex

	reportMu sync.Mutex
	reported string
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
	if cfg.Ready != nil {
		lb.ready = newReadyClient(*cfg.Ready)
	}
	initial := []string{fallback}
	lb.provisional = true
	if cfg.StateFile != "" {
		saved, err := readState(cfg.StateFile)
		switch {
		case err != nil:
			cfg.Report(fmt.Sprintf("load balancer: ignoring the saved server list: %v", err))
		case len(saved) > 0:
			initial, lb.provisional = saved, false
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
	go func() { defer lb.wg.Done(); lb.checkLoop() }()
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
	if lb.ready != nil {
		lb.ready.close()
	}
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
