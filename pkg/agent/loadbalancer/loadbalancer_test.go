package loadbalancer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/constants"

	"k1m.dev/k1m/pkg/testutil"
)

// fakeServer stands in for a kube-apiserver: a listener on [::1] that
// names itself on each connection ("<name>\n"), then echoes.
type fakeServer struct {
	t    *testing.T
	name string
	addr string

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
}

func startServer(t *testing.T, name string) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, name: name, addr: l.Addr().String()}
	s.serve(l)
	t.Cleanup(s.kill)
	return s
}

func (s *fakeServer) serve(l net.Listener) {
	s.mu.Lock()
	s.l = l
	s.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() {
				fmt.Fprintf(c, "%s\n", s.name)
				io.Copy(c, c)
			}()
		}
	}()
}

// kill stops the server as a dying process does: listener and
// connections closed.
func (s *fakeServer) kill() {
	s.hang()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// hang closes the listener only: the open connections stay, silent, as
// with a machine that vanished (no FIN, no RST reaches the client).
func (s *fakeServer) hang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.l != nil {
		s.l.Close()
		s.l = nil
	}
}

// revive listens again on the same address.
func (s *fakeServer) revive() {
	s.t.Helper()
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.serve(l)
}

// reports collects the balancer's progress lines.
type reports struct {
	mu    sync.Mutex
	lines []string
}

func (r *reports) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, s)
}

// statuses are the status lines reported so far.
func (r *reports) statuses() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.HasPrefix(l, "load balancer: servers ") {
			out = append(out, l)
		}
	}
	return out
}

func (r *reports) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

func (r *reports) last() string {
	s := r.statuses()
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// fast are timings for tests: failures show within a fraction of a second.
func fast(cfg Config) Config {
	cfg.DialTimeout = 500 * time.Millisecond
	cfg.CheckInterval = 100 * time.Millisecond
	cfg.RebalanceDelay = 10 * time.Millisecond
	cfg.Listen = "[::1]:0"
	return cfg
}

func start(t *testing.T, cfg Config) (*LoadBalancer, *reports) {
	t.Helper()
	r := &reports{}
	cfg.Report = r.add
	lb, err := Start(context.Background(), fast(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Close)
	return lb, r
}

// connect opens a connection through the balancer and returns it with
// the name of the server that answered.
func connect(t *testing.T, lb *LoadBalancer) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(lb.URL(), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	name, err := r.ReadString('\n')
	if err != nil {
		return "", c, r
	}
	c.SetReadDeadline(time.Time{})
	return strings.TrimSuffix(name, "\n"), c, r
}

// threeServers starts a, b, c and returns them by name, plus the
// preference order of node over them (as names).
func threeServers(t *testing.T, node string) (map[string]*fakeServer, []string, []string) {
	byName := map[string]*fakeServer{}
	byAddr := map[string]string{}
	var addrs []string
	for _, n := range []string{"a", "b", "c"} {
		s := startServer(t, n)
		byName[n] = s
		byAddr[s.addr] = n
		addrs = append(addrs, s.addr)
	}
	var order []string
	for _, a := range Order(node, addrs) {
		order = append(order, byAddr[a])
	}
	return byName, addrs, order
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// mustClose waits for the server side to close c (EOF or a reset).
func mustClose(t *testing.T, c net.Conn, r *bufio.Reader, within time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	_, err := r.ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection through the balancer is still open after %s", within)
	}
	if err == nil {
		t.Fatal("the connection through the balancer sent data, want it closed")
	}
}

func TestConnectionsGoToThePreferredServer(t *testing.T) {
	servers, addrs, order := threeServers(t, "node-1")
	lb, rep := start(t, Config{Server: "https://" + servers["a"].addr, NodeName: "node-1"})
	if got, want := lb.Servers(), []string{servers["a"].addr}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first list %v, want --server alone %v", got, want)
	}
	lb.Update(addrs)
	if got, want := lb.Servers(), sorted(addrs); !reflect.DeepEqual(got, want) {
		t.Fatalf("list %v, want %v", got, want)
	}
	for i := 0; i < 5; i++ {
		if got, _, _ := connect(t, lb); got != order[0] {
			t.Fatalf("connection %d went to %s, want the preferred server %s", i, got, order[0])
		}
	}
	// Echo: bytes pass through unchanged both ways.
	_, c, r := connect(t, lb)
	fmt.Fprintf(c, "ping\n")
	if got, err := r.ReadString('\n'); got != "ping\n" || err != nil {
		t.Fatalf("echo through the balancer: %q, %v", got, err)
	}
	want := []string{
		fmt.Sprintf("load balancer: servers [%s] (preferred %s)", servers["a"].addr, servers["a"].addr),
		fmt.Sprintf("load balancer: servers [%s] (preferred %s)", strings.Join(sorted(addrs), " "), servers[order[0]].addr),
	}
	if got := rep.statuses(); !reflect.DeepEqual(got, want) {
		t.Errorf("status lines\n got %q\nwant %q", got, want)
	}
}

// failedOver is a balancer of node over three servers whose preferred
// server died under a connection, which the client opened again, at once,
// through the next server of the node's order.
type failedOver struct {
	lb              *LoadBalancer
	rep             *reports
	addrs, order    []string
	preferred, next *fakeServer
	c               net.Conn // the connection through next
	r               *bufio.Reader
}

func failOver(t *testing.T, node string) failedOver {
	t.Helper()
	servers, addrs, order := threeServers(t, node)
	lb, rep := start(t, Config{Server: "https://" + servers["a"].addr, NodeName: node})
	lb.Update(addrs)
	got, c, r := connect(t, lb)
	if got != order[0] {
		t.Fatalf("went to %s, want %s", got, order[0])
	}
	f := failedOver{lb: lb, rep: rep, addrs: addrs, order: order, preferred: servers[order[0]], next: servers[order[1]]}
	f.preferred.kill()
	mustClose(t, c, r, 5*time.Second)
	if got, f.c, f.r = connect(t, lb); got != order[1] {
		t.Fatalf("reconnect went to %s, want the next in this node's order, %s", got, order[1])
	}
	return f
}

func TestFailoverToTheNextServerAndBack(t *testing.T) {
	f := failOver(t, "node-1")
	lb, rep, addrs, order, preferred, next := f.lb, f.rep, f.addrs, f.order, f.preferred, f.next
	downLine := fmt.Sprintf("load balancer: servers [%s] (preferred %s; down: %s; new connections go to %s)", strings.Join(sorted(addrs), " "), preferred.addr, preferred.addr, next.addr)
	testutil.Eventually(t, 5*time.Second, "status after the preferred server died", func() error {
		if l := rep.last(); l != downLine {
			return fmt.Errorf("last status %q, want %q", l, downLine)
		}
		return nil
	})
	for i := 0; i < 3; i++ {
		if got, _, _ := connect(t, lb); got != order[1] {
			t.Fatalf("new connection %d went to %s, want %s", i, got, order[1])
		}
	}

	preferred.revive()
	testutil.Eventually(t, 5*time.Second, "new connections back on the preferred server", func() error {
		if got, _, _ := connect(t, lb); got != order[0] {
			return fmt.Errorf("a new connection went to %s, want %s", got, order[0])
		}
		return nil
	})
	upLine := fmt.Sprintf("load balancer: servers [%s] (preferred %s)", strings.Join(sorted(addrs), " "), preferred.addr)
	if l := rep.last(); l != upLine {
		t.Errorf("last status %q, want %q", l, upLine)
	}
}

// A server that vanishes without closing its connections (a dead machine):
// the periodic check finds it down and the balancer closes the
// connections through it, so the client reconnects now rather than after
// TCP's timeouts.
func TestConnectionsToASilentlyDeadServerAreClosed(t *testing.T) {
	servers, addrs, order := threeServers(t, "node-7")
	lb, _ := start(t, Config{Server: "https://" + servers["a"].addr, NodeName: "node-7"})
	lb.Update(addrs)
	got, c, r := connect(t, lb)
	if got != order[0] {
		t.Fatalf("went to %s, want %s", got, order[0])
	}
	servers[order[0]].hang()
	mustClose(t, c, r, 3*time.Second)
	if got, _, _ := connect(t, lb); got != order[1] {
		t.Fatalf("reconnect went to %s, want %s", got, order[1])
	}
}

// The list grows from --server alone to the cluster's: connections open
// through --server move to this node's preferred server.
func TestConnectionsMoveToThePreferredServerWhenTheListChanges(t *testing.T) {
	// A node whose preferred server is not the one it joined through.
	var node string
	var servers map[string]*fakeServer
	var addrs, order []string
	for i := 0; ; i++ {
		node = fmt.Sprintf("node-%d", i)
		servers, addrs, order = threeServers(t, node)
		if order[0] != "a" {
			break
		}
	}
	lb, rep := start(t, Config{Server: "https://" + servers["a"].addr, NodeName: node})
	got, c, r := connect(t, lb)
	if got != "a" {
		t.Fatalf("went to %s, want --server's a", got)
	}
	lb.Update(addrs)
	mustClose(t, c, r, 3*time.Second)
	if got, _, _ := connect(t, lb); got != order[0] {
		t.Fatalf("reconnect went to %s, want %s", got, order[0])
	}
	want := fmt.Sprintf("load balancer: moving 1 connections from %s to %s", servers["a"].addr, servers[order[0]].addr)
	if !slices.Contains(rep.all(), want) {
		t.Errorf("reports %q lack %q", rep.all(), want)
	}
}

// --server stays the last resort when the list does not hold it.
func TestServerFlagIsTheLastResort(t *testing.T) {
	joined := startServer(t, "joined")
	dead := startServer(t, "dead")
	dead.kill()
	lb, rep := start(t, Config{Server: "https://" + joined.addr, NodeName: "node-1"})
	lb.Update([]string{dead.addr})
	if got, _, _ := connect(t, lb); got != "joined" {
		t.Fatalf("went to %q, want --server's", got)
	}
	want := fmt.Sprintf("load balancer: servers [%s] (preferred %s; down: %s; new connections go to %s)", dead.addr, dead.addr, dead.addr, joined.addr)
	if l := rep.last(); l != want {
		t.Errorf("last status %q, want %q", l, want)
	}
	// Removed servers' connections are closed; an empty list changes nothing.
	lb.Update(nil)
	if got, want := lb.Servers(), []string{dead.addr}; !reflect.DeepEqual(got, want) {
		t.Errorf("after an empty update: %v, want %v", got, want)
	}
}

func TestSavedListIsReadAtStart(t *testing.T) {
	servers, addrs, order := threeServers(t, "node-3")
	stateFile := filepath.Join(t.TempDir(), "loadbalancer.json")
	if err := writeState(stateFile, sorted(addrs)); err != nil {
		t.Fatal(err)
	}
	gone := startServer(t, "gone")
	gone.kill()
	lb, rep := start(t, Config{Server: "https://" + gone.addr, NodeName: "node-3", StateFile: stateFile})
	if got, want := lb.Servers(), sorted(addrs); !reflect.DeepEqual(got, want) {
		t.Fatalf("list at start %v, want the saved %v", got, want)
	}
	if got, _, _ := connect(t, lb); got != order[0] {
		t.Fatalf("went to %s, want %s", got, order[0])
	}
	want := []string{
		"load balancer: starting with the server list saved in " + stateFile,
		fmt.Sprintf("load balancer: servers [%s] (preferred %s)", strings.Join(sorted(addrs), " "), servers[order[0]].addr),
	}
	if got := rep.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("reports\n got %q\nwant %q", got, want)
	}
}

func TestStateFileRoundTripAndDamage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "loadbalancer.json")
	if got, err := readState(path); got != nil || err != nil {
		t.Fatalf("missing file: %v, %v; want nothing and no error", got, err)
	}
	list := []string{"[fddf:4035:b520::1]:6443", "[fddf:4035:b520::2]:6443"}
	if err := writeState(path, list); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if got, want := string(data), `{"servers":["[fddf:4035:b520::1]:6443","[fddf:4035:b520::2]:6443"]}`+"\n"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
	if got, err := readState(path); !reflect.DeepEqual(got, list) || err != nil {
		t.Errorf("read back %v, %v", got, err)
	}
	// A damaged file is reported and ignored: --server still works.
	os.WriteFile(path, []byte(`{"servers":["no-port"]}`), 0o644)
	s := startServer(t, "s")
	lb, rep := start(t, Config{Server: "https://" + s.addr, NodeName: "n", StateFile: path})
	if got, want := lb.Servers(), []string{s.addr}; !reflect.DeepEqual(got, want) {
		t.Errorf("list %v, want %v", got, want)
	}
	want := fmt.Sprintf("load balancer: ignoring the saved server list: %s: server \"no-port\": address no-port: missing port in address", path)
	if got := rep.all(); got[0] != want {
		t.Errorf("report %q, want %q", got[0], want)
	}
}

func TestBadServerURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://[fddf:4035:b520::1]:6443", "[fddf:4035:b520::1]:6443"},
		{"https://[fddf:4035:b520::1]:6443/", "[fddf:4035:b520::1]:6443"},
		{"https://k1m.example", "k1m.example:443"},
	} {
		if got, err := ServerAddress(c.url); got != c.want || err != nil {
			t.Errorf("ServerAddress(%q) = %q, %v; want %q", c.url, got, err, c.want)
		}
	}
	for _, c := range []struct{ url, want string }{
		{"https://[fddf:4035:b520::1", `load balancer: server URL "https://[fddf:4035:b520::1": want https://HOST:PORT, e.g. https://[fddf:4035:b520::1]:6443`},
		{"http://[::1]:6443", `load balancer: server URL "http://[::1]:6443": want https://HOST:PORT, e.g. https://[fddf:4035:b520::1]:6443`},
		{"", `load balancer: server URL "": want https://HOST:PORT, e.g. https://[fddf:4035:b520::1]:6443`},
		{"https://[::1]:6443/prefix", `load balancer: server URL "https://[::1]:6443/prefix": want https://HOST:PORT, e.g. https://[fddf:4035:b520::1]:6443`},
		{"https://[::1]:70000", `load balancer: server URL "https://[::1]:70000": port "70000" is not a TCP port`},
	} {
		lb, err := Start(context.Background(), fast(Config{Server: c.url, NodeName: "n"}))
		if err == nil {
			lb.Close()
			t.Errorf("Start with %q: no error", c.url)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("Start with %q:\n got %q\nwant %q", c.url, err, c.want)
		}
	}
}

func TestListenerInUse(t *testing.T) {
	s := startServer(t, "s")
	taken, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := fast(Config{Server: "https://" + s.addr, NodeName: "n"})
	cfg.Listen = taken.Addr().String()
	_, err = Start(context.Background(), cfg)
	want := fmt.Sprintf("load balancer: listen tcp %s: bind: address already in use (is another k1m agent running on this machine?)", cfg.Listen)
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// Close stops the listener and every connection through it.
func TestCloseEndsEverything(t *testing.T) {
	s := startServer(t, "s")
	lb, err := Start(context.Background(), fast(Config{Server: "https://" + s.addr, NodeName: "n"}))
	if err != nil {
		t.Fatal(err)
	}
	_, c, r := connect(t, lb)
	lb.Close()
	mustClose(t, c, r, time.Second)
	if c, err := net.Dial("tcp", strings.TrimPrefix(lb.URL(), "https://")); err == nil {
		c.Close()
		t.Error("the balancer still accepts after Close")
	}
}

func TestPortIsNoOtherListeners(t *testing.T) {
	if constants.AgentLoadBalancerPort == 6443 {
		t.Fatal("the balancer's port is kube-apiserver's")
	}
	for _, p := range []int{constants.KubeletPort, constants.KubeletHealthzPort, constants.KubeProxyMetricsPort,
		constants.KubeProxyHealthzPort, constants.ControllerManagerPort, constants.SchedulerPort, constants.ServerReadyPort, 2379, 2380, 2381, 2382} {
		if p == constants.AgentLoadBalancerPort {
			t.Errorf("the balancer's port %d is taken by another listener", p)
		}
	}
}

// The cluster's rebalance spread replaces the balancer's own delay only
// when it is longer.
func TestRebalanceWindowIsTheLongerOfTheDelayAndTheClustersSpread(t *testing.T) {
	s := startServer(t, "a")
	lb, _ := start(t, Config{Server: "https://" + s.addr, NodeName: "n1"})
	for _, c := range []struct{ spread, want time.Duration }{
		{0, 10 * time.Millisecond}, // fast's RebalanceDelay
		{64 * time.Second, 64 * time.Second},
		{time.Millisecond, 10 * time.Millisecond},
	} {
		lb.SetRebalanceSpread(c.spread)
		if got := lb.rebalanceWindow(); got != c.want {
			t.Errorf("spread %v: window %v, want %v", c.spread, got, c.want)
		}
	}
}

// After a failover the node's connections go back to its preferred
// server when it returns, after a random part of the rebalance window:
// after a rolling restart each server has its own nodes again.
func TestConnectionsMoveBackWhenThePreferredServerReturns(t *testing.T) {
	f := failOver(t, "node-3")
	lb, rep, order, preferred, next := f.lb, f.rep, f.order, f.preferred, f.next
	if lb.AtPreferred() {
		t.Errorf("AtPreferred with a connection through %s", next.addr)
	}
	preferred.revive()
	mustClose(t, f.c, f.r, 5*time.Second)
	if got, _, _ := connect(t, lb); got != order[0] {
		t.Fatalf("after the return a connection went to %s, want %s", got, order[0])
	}
	if !lb.AtPreferred() {
		t.Errorf("not AtPreferred once the connections moved back")
	}
	want := fmt.Sprintf("load balancer: moving 1 connections from %s to %s", next.addr, preferred.addr)
	if !slices.Contains(rep.all(), want) {
		t.Errorf("reports %q lack %q", rep.all(), want)
	}
}

// Only a server that returns as the one new connections go to takes the
// connections open elsewhere; the move is a new generation.
func TestReturnedServerTakesConnectionsOnlyAsTheTarget(t *testing.T) {
	withConn := func() map[*proxied]struct{} { return map[*proxied]struct{}{{}: {}} }
	for _, c := range []struct {
		name     string
		backends []*backend // in preference order; the returned one is "r"
		want     bool
	}{
		{"preferred returns, connections on the next", []*backend{{address: "r", healthy: true}, {address: "x", healthy: true, conns: withConn()}}, true},
		{"preferred returns, no connection elsewhere", []*backend{{address: "r", healthy: true}, {address: "x", healthy: true}}, false},
		{"a later server returns", []*backend{{address: "x", healthy: true, conns: withConn()}, {address: "r", healthy: true}}, false},
		{"a later server returns while the preferred is down", []*backend{{address: "x"}, {address: "r", healthy: true}, {address: "y", healthy: true, conns: withConn()}}, true},
		{"the server went down", []*backend{{address: "r"}, {address: "x", healthy: true, conns: withConn()}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lb := &LoadBalancer{backends: map[string]*backend{}, generation: 4}
			var returned *backend
			for _, b := range c.backends {
				lb.order = append(lb.order, b.address)
				lb.backends[b.address] = b
				if b.address == "r" {
					returned = b
				}
			}
			got, generation := lb.returnedIsTarget(returned)
			wantGeneration := 0
			if c.want {
				wantGeneration = 5
			}
			if got != c.want || generation != wantGeneration || lb.generation != max(4, wantGeneration) {
				t.Errorf("returnedIsTarget: %v, generation %d (lb's %d); want %v, %d", got, generation, lb.generation, c.want, wantGeneration)
			}
		})
	}
}
