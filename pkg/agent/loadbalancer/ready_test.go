package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/readiness"
	"k1m.dev/k1m/pkg/testutil"
)

// readyPKI is a cluster CA, a serving certificate for the test hosts, and
// client certificates: a node's of the cluster CA, and one of another CA.
type readyPKI struct {
	dir            string
	serving        readiness.TLSFiles
	node, stranger ReadyCheck
}

// Loopback addresses the fake servers listen on: one host each, so that
// each has its own readiness endpoint on the one readiness port.
var readyHosts = []string{"127.0.0.2", "127.0.0.3"}

func newReadyPKI(t *testing.T) readyPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.LoadOrCreateCA(dir, "other-ca", "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	var ips []net.IP
	for _, h := range readyHosts {
		ips = append(ips, net.ParseIP(h))
	}
	issue := func(ca *pki.Authority, leaf pki.Leaf) (string, string) {
		cert, key, err := ca.LoadOrIssue(dir, leaf)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	p := readyPKI{dir: dir}
	p.serving.CertFile, p.serving.KeyFile = issue(ca, pki.Leaf{Name: "apiserver", CommonName: "kube-apiserver", Server: true, IPs: ips})
	p.serving.ClientCAFile = filepath.Join(dir, "ca.crt")
	cert, key := issue(ca, pki.Leaf{Name: "node", CommonName: "system:node:n1", Organization: []string{"system:nodes"}, Client: true})
	p.node = ReadyCheck{CAFile: filepath.Join(dir, "ca.crt"), CertFile: cert, KeyFile: key}
	cert, key = issue(other, pki.Leaf{Name: "stranger", CommonName: "system:node:n1", Organization: []string{"system:nodes"}, Client: true})
	p.stranger = ReadyCheck{CAFile: filepath.Join(dir, "ca.crt"), CertFile: cert, KeyFile: key}
	return p
}

// readyServer is a server's readiness endpoint whose verdict the test sets.
type readyServer struct {
	err     atomic.Pointer[error]
	checker *readiness.Checker
}

func (r *readyServer) set(err error) {
	r.err.Store(&err)
	r.checker.CheckOnce(context.Background())
}

// startReadyServers serves a readiness endpoint on each of readyHosts,
// on one port, with p's serving certificate; all ready at first.
func startReadyServers(t *testing.T, p readyPKI) (int, []*readyServer) {
	t.Helper()
	tlsCfg, err := readiness.ServerTLS(p.serving)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for attempt := 0; attempt < 20; attempt++ {
		first, err := net.Listen("tcp", net.JoinHostPort(readyHosts[0], "0"))
		if err != nil {
			t.Skipf("no loopback address %s: %v", readyHosts[0], err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		listeners := []net.Listener{first}
		for _, h := range readyHosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				break
			}
			listeners = append(listeners, l)
		}
		if len(listeners) < len(readyHosts) {
			for _, l := range listeners {
				l.Close()
			}
			continue // the port is taken on another host: another one
		}
		var servers []*readyServer
		for _, l := range listeners {
			r := &readyServer{}
			r.checker = readiness.New(readiness.Config{Probes: []readiness.Probe{{Name: "store", Check: func(context.Context) error { return *r.err.Load() }}}, Interval: time.Hour})
			r.set(nil)
			go readiness.Serve(ctx, l, tlsCfg, r.checker.Handler())
			servers = append(servers, r)
		}
		return port, servers
	}
	t.Fatal("no port free on every test host")
	return 0, nil
}

// startHostServer is a fake kube-apiserver on host.
func startHostServer(t *testing.T, name, host string) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no loopback address %s: %v", host, err)
	}
	s := &fakeServer{t: t, name: name, addr: l.Addr().String()}
	s.serve(l)
	t.Cleanup(s.kill)
	return s
}

func TestReadyCheck(t *testing.T) {
	p := newReadyPKI(t)
	port, servers := startReadyServers(t, p)
	address := net.JoinHostPort(readyHosts[0], "6443") // the kube-apiserver port is not the one asked
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	node := p.node
	node.Port = port
	r := newReadyClient(node)
	defer r.close()
	if err := r.check(ctx, address); err != nil {
		t.Errorf("ready server: %v, want up", err)
	}
	servers[0].set(errors.New("writing /k1m/probe/s1: context deadline exceeded"))
	err := r.check(ctx, address)
	if want := "/k1m/readyz: 503 not ready: store: writing /k1m/probe/s1: context deadline exceeded (at "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("unready server: %v, want %q...", err, want)
	}
	// Negative: another CA's certificate gets no answer.
	stranger := p.stranger
	stranger.Port = port
	s := newReadyClient(stranger)
	defer s.close()
	servers[0].set(nil)
	if err := s.check(ctx, address); err == nil {
		t.Error("another CA's certificate: the server answered, want the handshake refused")
	}
	// No credentials yet (the node has not joined): errNoCredentials.
	none := newReadyClient(ReadyCheck{CAFile: filepath.Join(t.TempDir(), "ca.crt"), CertFile: filepath.Join(t.TempDir(), "c.pem"), KeyFile: filepath.Join(t.TempDir(), "c.pem"), Port: port})
	if err := none.check(ctx, address); !errors.Is(err, errNoCredentials) {
		t.Errorf("before the join: %v, want %v", err, errNoCredentials)
	}
}

// A server that stops being ready loses the node's connections within a
// check interval, although it still accepts them, and gets them back
// when it is ready again.
func TestUnreadyServerIsLeft(t *testing.T) {
	p := newReadyPKI(t)
	port, ready := startReadyServers(t, p)
	a, b := startHostServer(t, "a", readyHosts[0]), startHostServer(t, "b", readyHosts[1])
	// A node that prefers a.
	node := ""
	for i := 0; node == ""; i++ {
		if n := fmt.Sprintf("node-%d", i); Order(n, []string{a.addr, b.addr})[0] == a.addr {
			node = n
		}
	}
	check := p.node
	check.Port = port
	lb, rep := start(t, Config{Server: "https://" + a.addr, NodeName: node, Ready: &check})
	lb.Update([]string{a.addr, b.addr})
	got, c, r := connect(t, lb)
	if got != "a" {
		t.Fatalf("went to %s, want the preferred a", got)
	}
	ready[0].set(errors.New("lost quorum"))
	mustClose(t, c, r, 3*time.Second)
	if got, _, _ := connect(t, lb); got != "b" {
		t.Fatalf("reconnect went to %s, want b", got)
	}
	down := fmt.Sprintf("load balancer: servers [%s %s] (preferred %s; down: %s; new connections go to %s)", a.addr, b.addr, a.addr, a.addr, b.addr)
	testutil.Eventually(t, 5*time.Second, "status with a down", func() error {
		if l := rep.last(); l != down {
			return fmt.Errorf("last status %q, want %q", l, down)
		}
		return nil
	})
	ready[0].set(nil)
	testutil.Eventually(t, 5*time.Second, "new connections back on a", func() error {
		if got, _, _ := connect(t, lb); got != "a" {
			return fmt.Errorf("a new connection went to %s, want a", got)
		}
		return nil
	})
}

func TestCheckJitterBounds(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want time.Duration
	}{{0, 4 * time.Second}, {0.5, 5 * time.Second}, {0.99999, 6 * time.Second}} {
		got := jittered(DefaultCheckInterval, c.r)
		if d := got - c.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("jittered(%s, %v) = %s, want %s", DefaultCheckInterval, c.r, got, c.want)
		}
	}
}

// Before the node has its certificate, and for --server's address when
// the list does not hold it, the check is a TCP connection.
func TestCheckIsATCPConnectionWithoutCredentialsOrForTheFallback(t *testing.T) {
	p := newReadyPKI(t)
	listed, joined := startServer(t, "listed"), startServer(t, "joined")
	missing := filepath.Join(t.TempDir(), "none.pem")
	noCreds := ReadyCheck{CAFile: missing, CertFile: missing, KeyFile: missing, Port: 1}
	lb, _ := start(t, Config{Server: "https://" + joined.addr, NodeName: "n", Ready: &noCreds})
	lb.Update([]string{listed.addr})
	ctx := context.Background()
	if err := lb.check(ctx, listed.addr); err != nil {
		t.Errorf("listed server, no certificate yet: %v, want up (TCP)", err)
	}
	// With credentials, a listed server without a readiness endpoint
	// (nothing on port 1) is down; --server's address, not listed, is
	// still checked by TCP.
	creds := p.node
	creds.Port = 1
	lb2, _ := start(t, Config{Server: "https://" + joined.addr, NodeName: "n", Ready: &creds})
	lb2.Update([]string{listed.addr})
	if err := lb2.check(ctx, listed.addr); err == nil {
		t.Error("listed server without readiness: up, want down")
	}
	if err := lb2.check(ctx, joined.addr); err != nil {
		t.Errorf("--server's address, not listed: %v, want up (TCP)", err)
	}
}
