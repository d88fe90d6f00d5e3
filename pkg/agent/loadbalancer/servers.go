package loadbalancer

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// backend is one server and the connections open through it.
type backend struct {
	address string
	healthy bool
	conns   map[*proxied]struct{}
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

// Update merges the kubernetes endpoints (host:port each) into the
// server list: the list keeps every server it has seen, and forgets one
// only when the cluster lists it as removed (SetRemoved). An endpoint
// missing for a moment (a server restarting, its lease lapsed, the whole
// slice empty) is not a server gone: an agent that believed the
// endpoints would, when that server went down, have nowhere to go. The
// list from --server alone (no saved list) is replaced by the first
// endpoints, not merged: --server may name a DNS name or a virtual IP
// in front of the servers. The --server address stays reachable as the
// last resort when the list does not hold it, tried after every listed
// server; it takes no part in the spread.
//
// A changed list is saved to StateFile; connections through servers no
// longer listed are closed at once, and those through servers that are
// not this node's preferred one move there after a random delay of up
// to RebalanceDelay.
func (lb *LoadBalancer) Update(endpoints []string) {
	lb.change(func() []string {
		lb.endpoints = normalize(endpoints)
		if len(lb.endpoints) == 0 {
			return lb.servers
		}
		if lb.provisional {
			lb.provisional = false
			return lb.known(lb.endpoints)
		}
		return lb.known(append(slices.Clone(lb.servers), lb.endpoints...))
	})
}

// SetRemoved forgets the servers the cluster says were removed
// (host:port each; `k1m server remove` lists them in kube-public/k1m-cluster)
// and brings back one listed before that no longer is, if the endpoints
// still name it.
func (lb *LoadBalancer) SetRemoved(removed []string) {
	lb.change(func() []string {
		lb.removed = normalize(removed)
		return lb.known(append(slices.Clone(lb.servers), lb.endpoints...))
	})
}

// known is candidates, normalized, less the removed servers. Called with
// mu held.
func (lb *LoadBalancer) known(candidates []string) []string {
	return slices.DeleteFunc(normalize(candidates), func(a string) bool { return slices.Contains(lb.removed, a) })
}

// change installs the list next computes (with mu held), if it differs;
// see Update for what follows a change.
func (lb *LoadBalancer) change(next func() []string) {
	// One change at a time, so that the file saves the last list.
	lb.updateMu.Lock()
	defer lb.updateMu.Unlock()
	if lb.ctx.Err() != nil {
		return
	}
	lb.mu.Lock()
	list := next()
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
	time.AfterFunc(rand.N(lb.rebalanceWindow()), func() { lb.rebalance(generation) })
}

// SetRebalanceSpread sets the cluster's rebalance spread (k1m-cluster's
// rebalanceSpread, which the servers size by the node count): a move back
// to a server that returned makes the node list again what it watches
// on that server's new watch cache, and the cluster's nodes that prefer
// it must not all do so at once.
func (lb *LoadBalancer) SetRebalanceSpread(d time.Duration) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.rebalanceSpread = d
}

// rebalanceWindow is what a rebalance waits a random part of: the
// cluster's spread, or RebalanceDelay when that is longer.
func (lb *LoadBalancer) rebalanceWindow() time.Duration {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return max(lb.cfg.RebalanceDelay, lb.rebalanceSpread)
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

// AtPreferred tells whether every connection open through the balancer
// goes through this node's preferred server: true after a failover once
// the moves back are done (the benchmark's rolling restart waits on it).
func (lb *LoadBalancer) AtPreferred() bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for addr, b := range lb.backends {
		if addr != lb.order[0] && len(b.conns) > 0 {
			return false
		}
	}
	return true
}
