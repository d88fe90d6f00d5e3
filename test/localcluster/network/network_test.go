package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// throwawayHost is a fresh network namespace standing in for the host, so
// that the test's bridge never touches the machine's network.
func throwawayHost(t *testing.T) *Host {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	ns := netns.None()
	if err := onOwnThread(func() error {
		var err error
		ns, err = netns.New()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h, err := HostAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// The names carry the test's pid so that a run never meets another's
// (an interface name has at most 15 characters).
func testNames() (bridge, nsPrefix string, a, b Namespace) {
	id := os.Getpid() % 100000
	nsPrefix = fmt.Sprintf("k1m-nettest-%d-", id)
	prefix := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	return fmt.Sprintf("k1mt-br%d", id), nsPrefix,
		Namespace{Name: nsPrefix + "a", Veth: fmt.Sprintf("k1mt-%da", id), Addr: prefix("fddf:4035:b5ff::11/64")},
		Namespace{Name: nsPrefix + "b", Veth: fmt.Sprintf("k1mt-%db", id), Addr: prefix("fddf:4035:b5ff::1:1/64")}
}

// testBridge is a throwaway host with the test's bridge (not yet made)
// and two namespaces (not yet added), all removed at the test's end.
func testBridge(t *testing.T) (h *Host, br Bridge, nsPrefix string, a, b Namespace) {
	h = throwawayHost(t)
	brName, nsPrefix, a, b := testNames()
	br = Bridge{Name: brName, Addr: netip.MustParsePrefix("fddf:4035:b5ff::1/64")}
	t.Cleanup(func() {
		DeleteNamespace(a.Name)
		DeleteNamespace(b.Name)
		h.DeleteBridge(br.Name)
		ReleaseRunDir()
	})
	return h, br, nsPrefix, a, b
}

func TestBridgeAndNamespaces(t *testing.T) {
	h, br, nsPrefix, a, b := testBridge(t)
	if err := h.EnsureBridge(br); err != nil {
		t.Fatal(err)
	}
	if err := h.EnsureBridge(br); err != nil { // a bridge left behind is reused
		t.Fatalf("second EnsureBridge: %v", err)
	}
	for _, n := range []Namespace{a, b} {
		if err := h.AddNamespace(br, n); err != nil {
			t.Fatal(err)
		}
	}
	checkBridge(t, h, br)
	for _, n := range []Namespace{a, b} {
		checkPort(t, h, br, n)
		checkInside(t, n, br.Addr.Addr())
	}
	if got, err := Namespaces(nsPrefix); err != nil || !slices.Equal(got, []string{a.Name, b.Name}) {
		t.Errorf("Namespaces = %q, %v; want %q", got, err, []string{a.Name, b.Name})
	}
	if _, err := CurrentHost(); err != nil {
		t.Fatal(err)
	}
	if real, _ := netlink.LinkByName(br.Name); real != nil {
		t.Errorf("bridge %s made in the machine's own network namespace", br.Name)
	}
	checkReachable(t, a, b)
	checkPids(t, a)
	checkHostname(t, a)

	for _, n := range []Namespace{a, b} {
		if err := DeleteNamespace(n.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.DeleteBridge(br.Name); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteBridge(br.Name); err != nil {
		t.Errorf("deleting a missing bridge: %v, want nothing done", err)
	}
	checkNothingLeft(t, h, br.Name, a, b)
}

func checkBridge(t *testing.T, h *Host, br Bridge) {
	t.Helper()
	link, err := h.nl.LinkByName(br.Name)
	if err != nil {
		t.Fatal(err)
	}
	if link.Type() != "bridge" || link.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("%s: type %s, flags %v; want an up bridge", br.Name, link.Type(), link.Attrs().Flags)
	}
	if got := globalAddrs(t, h.nl, link); !slices.Equal(got, []string{"fddf:4035:b5ff::1/64 nodad"}) {
		t.Errorf("%s addresses %q", br.Name, got)
	}
}

// checkPort wants n's host end up on the bridge with hairpin on.
func checkPort(t *testing.T, h *Host, br Bridge, n Namespace) {
	t.Helper()
	bridge, _ := h.nl.LinkByName(br.Name)
	link, err := h.nl.LinkByName(n.Veth)
	if err != nil {
		t.Fatal(err)
	}
	if link.Type() != "veth" || link.Attrs().MasterIndex != bridge.Attrs().Index || link.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("%s: type %s, master %d, flags %v; want an up veth on %s (%d)", n.Veth, link.Type(), link.Attrs().MasterIndex, link.Attrs().Flags, br.Name, bridge.Attrs().Index)
	}
	info, err := h.nl.LinkGetProtinfo(link)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Hairpin {
		t.Errorf("%s: hairpin off", n.Veth)
	}
}

// checkInside wants lo and eth0 up in n, n's address on eth0 and the
// default route via gateway.
func checkInside(t *testing.T, n Namespace, gateway netip.Addr) {
	t.Helper()
	ns, err := netns.GetFromName(n.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	links, _ := nl.LinkList()
	var names []string
	for _, l := range links {
		names = append(names, fmt.Sprintf("%s up=%t", l.Attrs().Name, l.Attrs().Flags&net.FlagUp != 0))
	}
	if want := []string{"lo up=true", "eth0 up=true"}; !slices.Equal(names, want) {
		t.Errorf("links in %s: %q, want %q", n.Name, names, want)
	}
	eth, _ := nl.LinkByName("eth0")
	if got, want := globalAddrs(t, nl, eth), []string{n.Addr.String() + " nodad"}; !slices.Equal(got, want) {
		t.Errorf("eth0 addresses in %s: %q, want %q", n.Name, got, want)
	}
	routes, err := nl.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Gw: net.IP(gateway.AsSlice())}, netlink.RT_FILTER_GW)
	if err != nil || len(routes) != 1 || routes[0].Dst != nil && routes[0].Dst.String() != "::/0" || routes[0].LinkIndex != eth.Attrs().Index {
		t.Errorf("routes via %s in %s: %v, %v; want one default route on eth0", gateway, n.Name, routes, err)
	}
}

func globalAddrs(t *testing.T, nl *netlink.Handle, link netlink.Link) []string {
	t.Helper()
	addrs, err := nl.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if a.Scope == unix.RT_SCOPE_UNIVERSE {
			s := a.IPNet.String()
			if a.Flags&unix.IFA_F_NODAD != 0 {
				s += " nodad"
			}
			out = append(out, s)
		}
	}
	return out
}

// checkReachable opens a TCP connection from a to b across the bridge.
func checkReachable(t *testing.T, a, b Namespace) {
	t.Helper()
	var ln net.Listener
	if err := inNamespace(b.Name, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(b.Addr.Addr(), 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	var got []byte
	err := inNamespace(a.Name, func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got = make([]byte, 5)
		_, err = c.Read(got)
		return err
	})
	if err != nil || string(got) != "hello" {
		t.Errorf("from %s to %s: %q, %v", a.Name, ln.Addr(), got, err)
	}
}

func inNamespace(name string, fn func() error) error {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	defer ns.Close()
	return onOwnThread(func() error {
		if err := netns.Set(ns); err != nil {
			return err
		}
		return fn()
	})
}

// checkPids starts a process in n with Start and wants Pids to list it,
// and the process to see n's address and nothing of the host's.
func checkPids(t *testing.T, n Namespace) {
	t.Helper()
	if pids, err := Pids(n.Name); err != nil || len(pids) != 0 {
		t.Errorf("Pids(%s) before = %v, %v; want none", n.Name, pids, err)
	}
	cmd := exec.Command("sleep", "60")
	if err := Start(cmd, n.Name, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if pids, err := Pids(n.Name); err != nil || !slices.Equal(pids, []int{cmd.Process.Pid}) {
		t.Errorf("Pids(%s) = %v, %v; want [%d]", n.Name, pids, err, cmd.Process.Pid)
	}
	own, _ := os.Readlink("/proc/self/ns/net")
	if child, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)); child == own {
		t.Errorf("process started in %s runs in the test's network namespace %s", n.Name, own)
	}
}

// Start with a hostname: the process has a UTS namespace of its own with
// that hostname, in the named network namespace; the caller's hostname
// and UTS namespace stay as they were.
func checkHostname(t *testing.T, n Namespace) {
	t.Helper()
	before, _ := os.Hostname()
	ownUTS, _ := os.Readlink("/proc/self/ns/uts")
	ownNet, _ := os.Readlink("/proc/self/ns/net")
	for i := 0; i < 3; i++ { // later Starts must not run on a thread an earlier one changed
		cmd := exec.Command("sh", "-c", "cat /proc/sys/kernel/hostname; readlink /proc/self/ns/uts /proc/self/ns/net")
		var out strings.Builder
		cmd.Stdout = &out
		if err := Start(cmd, n.Name, "k1mt-host"); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(out.String())
		if len(got) != 3 || got[0] != "k1mt-host" || got[1] == ownUTS || got[2] == ownNet {
			t.Errorf("a process started in %s as k1mt-host saw hostname, UTS and network namespaces %q; want k1mt-host, not %s, not %s", n.Name, got, ownUTS, ownNet)
		}
		var hostOnly strings.Builder
		plain := exec.Command("cat", "/proc/sys/kernel/hostname")
		plain.Stdout = &hostOnly
		if err := Start(plain, "", ""); err != nil {
			t.Fatal(err)
		}
		plain.Wait()
		if after, _ := os.Hostname(); after != before || strings.TrimSpace(hostOnly.String()) != before {
			t.Errorf("after Start with a hostname: this process's hostname %q, a plain child's %q; want %q", after, strings.TrimSpace(hostOnly.String()), before)
		}
	}
	if uts, _ := os.Readlink("/proc/self/ns/uts"); uts != ownUTS {
		t.Errorf("this thread's UTS namespace is %s, was %s", uts, ownUTS)
	}
}

// The host as a provider's router: a range that lives behind namespace b
// (an address of it on b's lo, as a node's pods live behind the node) is
// reached from a only once the host routes it via b's address; a's own
// table holds no route to it, only the default route via the host.
func TestRouteVia(t *testing.T) {
	h := throwawayHost(t)
	brName, _, a, b := testNames()
	br := Bridge{Name: brName, Addr: netip.MustParsePrefix("fddf:4035:b5ff::1/64")}
	t.Cleanup(func() {
		DeleteNamespace(a.Name)
		DeleteNamespace(b.Name)
		ReleaseRunDir()
		h.DeleteBridge(br.Name)
	})
	if err := h.EnsureBridge(br); err != nil {
		t.Fatal(err)
	}
	for _, n := range []Namespace{a, b} {
		if err := h.AddNamespace(br, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.EnableIPv6Forwarding(); err != nil {
		t.Fatal(err)
	}
	podRange, pod := netip.MustParsePrefix("fddf:4035:b5fe:2::/64"), netip.MustParseAddr("fddf:4035:b5fe:2::1")
	if err := inNamespace(b.Name, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(lo, noDAD(netip.PrefixFrom(pod, 128)))
	}); err != nil {
		t.Fatal(err)
	}
	behindB := Namespace{Name: b.Name, Addr: netip.PrefixFrom(pod, 128)}
	if err := dial(a, behindB, time.Second); err == nil {
		t.Fatalf("%s reached from %s before the host routes %s", pod, a.Name, podRange)
	}
	if err := h.RouteVia(br, podRange, b.Addr.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := h.RouteVia(br, podRange, b.Addr.Addr()); err != nil { // again: replaced
		t.Fatalf("the same route again: %v", err)
	}
	routes, err := h.nl.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Dst: ipNet(podRange)}, netlink.RT_FILTER_DST)
	bridge, _ := h.nl.LinkByName(br.Name)
	if err != nil || len(routes) != 1 || !routes[0].Gw.Equal(net.IP(b.Addr.Addr().AsSlice())) || routes[0].LinkIndex != bridge.Attrs().Index {
		t.Errorf("host routes to %s: %v, %v; want one via %s dev %s", podRange, routes, err, b.Addr.Addr(), br.Name)
	}
	if err := dial(a, behindB, 5*time.Second); err != nil {
		t.Errorf("from %s to %s through the host: %v", a.Name, pod, err)
	}
	inA, err := RoutesIn(a.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range inA {
		if r.Dst.Overlaps(podRange) && r.Dst.Bits() > 0 {
			t.Errorf("%s routes %s itself (%+v): want only its default route via the host", a.Name, podRange, r)
		}
	}
	if !slices.Contains(inA, Route{Dst: netip.MustParsePrefix("::/0"), Via: br.Addr.Addr()}) {
		t.Errorf("routes in %s: %+v, want the default route via %s", a.Name, inA, br.Addr.Addr())
	}
}

// dial opens a TCP connection from namespace from to a listener on to's
// address in namespace to.
func dial(from, to Namespace, timeout time.Duration) error {
	var ln net.Listener
	if err := inNamespace(to.Name, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(to.Addr.Addr(), 0).String())
		return err
	}); err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	return inNamespace(from.Name, func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func TestEnableIPv6Forwarding(t *testing.T) {
	h := throwawayHost(t)
	if err := h.EnableIPv6Forwarding(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := onOwnThread(func() error {
		if err := netns.Set(h.ns); err != nil {
			return err
		}
		var err error
		got, err = os.ReadFile("/proc/sys/net/ipv6/conf/all/forwarding")
		return err
	}); err != nil || string(got) != "1\n" {
		t.Errorf("forwarding in the namespace: %q, %v; want 1", got, err)
	}
}

// checkNothingLeft wants no namespace, veth or bridge of the test left.
func checkNothingLeft(t *testing.T, h *Host, bridge string, ns ...Namespace) {
	t.Helper()
	for _, n := range ns {
		if _, err := os.Stat(RunDir + "/" + n.Name); err == nil {
			t.Errorf("namespace %s left", n.Name)
		}
	}
	// A namespace's devices go once the kernel has cleaned it up, shortly
	// after its last reference.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, name := range []string{bridge, ns[0].Veth, ns[1].Veth} {
			if h.LinkExists(name) {
				left = append(left, name)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("links left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A namespace held past its deletion (here by an open handle; anything
// outside the harness can) keeps its veth, whose name the next cluster
// wants: DeletePorts and DeleteLink free it.
func TestVethOfAHeldNamespace(t *testing.T) {
	h, br, _, a, b := testBridge(t)
	if err := h.EnsureBridge(br); err != nil {
		t.Fatal(err)
	}
	held := func(n Namespace) {
		t.Helper()
		if err := h.AddNamespace(br, n); err != nil {
			t.Fatal(err)
		}
		handle, err := netns.GetFromName(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { handle.Close() })
		if err := DeleteNamespace(n.Name); err != nil {
			t.Fatal(err)
		}
		if !h.LinkExists(n.Veth) {
			t.Fatalf("%s went with its namespace although a handle holds it; the test shows nothing", n.Veth)
		}
	}

	held(a)
	if err := h.AddNamespace(br, a); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("AddNamespace over a held namespace's veth: %v, want %v", err, unix.EEXIST)
	}
	DeleteNamespace(a.Name)
	if deleted, err := h.DeleteLink(a.Veth); !deleted || err != nil {
		t.Fatalf("DeleteLink(%s) = %v, %v; want true, nil", a.Veth, deleted, err)
	}
	if deleted, err := h.DeleteLink(a.Veth); deleted || err != nil {
		t.Fatalf("DeleteLink(%s) again = %v, %v; want false, nil", a.Veth, deleted, err)
	}
	if err := h.AddNamespace(br, a); err != nil {
		t.Fatalf("AddNamespace once the veth is deleted: %v", err)
	}

	held(b)
	if err := DeleteNamespace(a.Name); err != nil {
		t.Fatal(err)
	}
	got, err := h.DeletePorts(br.Name)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	// a's veth may still be going with its namespace; b's must be among them.
	if !slices.Contains(got, b.Veth) {
		t.Errorf("DeletePorts = %q, want %s among them", got, b.Veth)
	}
	if h.LinkExists(b.Veth) {
		t.Errorf("%s left after DeletePorts", b.Veth)
	}
	if got, err := h.DeletePorts("k1mt-missing"); got != nil || err != nil {
		t.Errorf("DeletePorts of a missing bridge = %q, %v; want nothing", got, err)
	}
}
