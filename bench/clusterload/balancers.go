package clusterload

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/agent/loadbalancer"
)

// balancers put the simulated nodes of a cluster of several servers
// (Config.Servers) behind the k1m agent's load balancer
// (pkg/agent/loadbalancer), as real nodes reach it: one balancer per
// connection, named after the connection's first node, whose nodes share
// it. Each prefers the server its name ranks first, fails over at once
// when that one stops, and moves back after a random part of the
// rebalance window (30 s below 3,000 nodes) when it returns. The readiness
// check uses the admin's client certificate, as a node's uses its own.
type balancers struct {
	ctx     context.Context
	base    *rest.Config
	servers []string // host:port of each server's API
	dir     string   // the readiness checks' credentials
	ready   loadbalancer.ReadyCheck

	mu  sync.Mutex
	all []*loadbalancer.LoadBalancer
	log *os.File // every balancer's report lines, named; nil: none kept
}

// newBalancers writes the admin's credentials in a directory of their own
// for the readiness checks (removeCredentials deletes it); balancers stop
// when ctx ends.
// Their report lines go to logPath ("": none kept).
func newBalancers(ctx context.Context, servers []Server, logPath string) (*balancers, error) {
	dir, err := os.MkdirTemp("", "k1m-bench-balancers-")
	if err != nil {
		return nil, err
	}
	b, err := balancersIn(ctx, servers, dir)
	if err == nil && logPath != "" {
		b.log, err = os.Create(logPath)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

func balancersIn(ctx context.Context, servers []Server, dir string) (*balancers, error) {
	base := rest.CopyConfig(servers[0].Config)
	if err := rest.LoadTLSFiles(base); err != nil {
		return nil, fmt.Errorf("the admin's credentials: %w", err)
	}
	base.CAFile, base.CertFile, base.KeyFile = "", "", "" // now in the Data fields
	b := &balancers{ctx: ctx, base: base, dir: dir, ready: loadbalancer.ReadyCheck{
		CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "admin.pem"), KeyFile: filepath.Join(dir, "admin.pem")}}
	for _, s := range servers {
		u, err := url.Parse(s.Config.Host)
		if err != nil {
			return nil, fmt.Errorf("server URL %q: %w", s.Config.Host, err)
		}
		b.servers = append(b.servers, u.Host)
	}
	if err := os.WriteFile(b.ready.CAFile, base.CAData, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(b.ready.CertFile, append(append([]byte{}, base.CertData...), base.KeyData...), 0o600); err != nil {
		return nil, err
	}
	return b, nil
}

// config is a client config reaching the cluster through a new balancer
// named name, which knows every server.
func (b *balancers) config(name string) (*rest.Config, error) {
	lb, err := loadbalancer.Start(b.ctx, loadbalancer.Config{Server: "https://" + b.servers[0], NodeName: name, Listen: "[::1]:0", Ready: &b.ready,
		Report: func(line string) { b.report(name, line) }})
	if err != nil {
		return nil, err
	}
	lb.Update(b.servers)
	b.mu.Lock()
	b.all = append(b.all, lb)
	b.mu.Unlock()
	cfg := rest.CopyConfig(b.base)
	cfg.Host = lb.URL()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	// HTTP/2 alone, whose transport dials one connection at a time: the
	// default one dials a connection for each request made before the
	// first is up, and a connection's hundreds of watches starting at
	// once (a join burst, a failover) opened hundreds, three sockets each
	// with a balancer in this process, past the open file limit.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Transport = &http2.Transport{TLSClientConfig: tlsCfg, ReadIdleTimeout: 30 * time.Second, PingTimeout: 15 * time.Second}
	return cfg, nil
}

// awayFromPreferred counts the balancers with a connection through a
// server other than their preferred one: 0 once the moves back are done.
func (b *balancers) awayFromPreferred() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, lb := range b.all {
		if !lb.AtPreferred() {
			n++
		}
	}
	return n
}

// report keeps a balancer's report line, timed and named.
func (b *balancers) report(name, line string) {
	if b.log == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(b.log, "%s %s: %s\n", time.Now().UTC().Format("15:04:05.000"), name, line)
}

// close deletes the readiness checks' credentials and closes the log.
func (b *balancers) close() {
	os.RemoveAll(b.dir)
	if b.log != nil {
		b.mu.Lock()
		b.log.Close()
		b.log = nil
		b.mu.Unlock()
	}
}
