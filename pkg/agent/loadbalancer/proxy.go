package loadbalancer

import (
	"errors"
	"io"
	"net"
	"time"
)

// proxied is one client connection and its server side.
type proxied struct{ client, server net.Conn }

func (p *proxied) close() {
	p.client.Close()
	p.server.Close()
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
		if lb.dialSaysUp(b.address) {
			lb.setHealth(b, nil)
		}
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
