package loadbalancer

import (
	"context"
	"fmt"
	"sync"
)

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
