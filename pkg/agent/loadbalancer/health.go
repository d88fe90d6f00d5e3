package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// setHealth records the outcome of a dial or a check (err nil: up). A
// server that goes down has its connections closed at once: clients
// (the kubelet's HTTP/2 connection above all) would otherwise wait for TCP
// to time out, and they reconnect through the balancer to the next
// server instead. A server that comes back and is now the one new
// connections go to gets the node's other connections back after a
// random part of the rebalance window: without that, after a rolling
// restart the server restarted last would keep none of its nodes, and
// they would come back only when their connections broke.
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
	moveBack, generation := lb.returnedIsTarget(b)
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
	if moveBack {
		time.AfterFunc(rand.N(lb.rebalanceWindow()), func() { lb.rebalance(generation) })
	}
}

// returnedIsTarget tells whether b, just marked up, is now where new
// connections go while some connections are open through other servers:
// then a rebalance is due, and it counts as a change of the list's
// generation (a later change supersedes it). Called with mu held.
func (lb *LoadBalancer) returnedIsTarget(b *backend) (bool, int) {
	if !b.healthy {
		return false, 0
	}
	for _, addr := range lb.order {
		if first := lb.backends[addr]; first.healthy {
			if first != b {
				return false, 0
			}
			break
		}
	}
	for _, other := range lb.backends {
		if other != b && len(other.conns) > 0 {
			lb.generation++
			return true, lb.generation
		}
	}
	return false, 0
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

// checkLoop checks at once, then every CheckInterval ± 20%, until the
// balancer stops.
func (lb *LoadBalancer) checkLoop() {
	for {
		lb.checkOnce(lb.ctx)
		select {
		case <-lb.ctx.Done():
			return
		case <-time.After(jittered(lb.cfg.CheckInterval, rand.Float64())):
		}
	}
}

// check tells whether the server at address is up, within DialTimeout:
// a listed server by its readiness (Config.Ready) once the node has its
// certificate, else by a TCP connection.
func (lb *LoadBalancer) check(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, lb.cfg.DialTimeout)
	defer cancel()
	if lb.ready != nil && lb.listed(address) {
		err := lb.ready.check(ctx, address)
		if !errors.Is(err, errNoCredentials) {
			return err
		}
	}
	return lb.dialCheck(ctx, address)
}

// dialSaysUp tells whether a connection address accepted shows it up:
// not when its check asks for more than a TCP connection (a server that
// is not ready accepts connections all the same).
func (lb *LoadBalancer) dialSaysUp(address string) bool {
	return lb.ready == nil || !lb.listed(address) || !lb.ready.usable()
}

// listed tells whether address is in the list (not --server's last resort).
func (lb *LoadBalancer) listed(address string) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return slices.Contains(lb.servers, address)
}

// dialCheck is the check without readiness: a TCP connection, closed at once.
func (lb *LoadBalancer) dialCheck(ctx context.Context, address string) error {
	c, err := lb.dialer.DialContext(ctx, "tcp", address)
	if err != nil {
		return err
	}
	return c.Close()
}
