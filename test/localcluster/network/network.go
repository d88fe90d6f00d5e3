// Package network builds the one-machine network of a local k1m cluster
// (test/localcluster): a bridge in the host's network namespace holding the
// host's address, and one named network namespace per node, joined to the
// bridge by a veth pair whose namespace end is eth0 with the node's
// address. kind's network setup is the model: the topology in Go, through
// netlink, tested against real namespaces.
package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RunDir holds the named network namespaces, as iproute2 keeps them
// (`ip netns list` shows what is created here).
const RunDir = "/run/netns"

// nsDevice is every namespace's end of its veth pair.
const nsDevice = "eth0"

// Bridge is the bridge every node namespace is a port of.
type Bridge struct {
	Name string
	// Addr is the host's address on the bridge, with the nodes' prefix;
	// it is every namespace's default gateway.
	Addr netip.Prefix
}

// Namespace is one node's network namespace.
type Namespace struct {
	Name string       // RunDir/Name
	Veth string       // the host end of its veth pair, a port of the bridge
	Addr netip.Prefix // its address on eth0
}

// Host is the network namespace the bridge lives in: the machine's own,
// or a throwaway one in the tests.
type Host struct {
	ns netns.NsHandle
	nl *netlink.Handle
}

// CurrentHost is the calling thread's network namespace (the machine's:
// nothing in this package leaves a thread elsewhere).
func CurrentHost() (*Host, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("opening this process's network namespace: %w", err)
	}
	return hostOf(ns)
}

// HostAt is network namespace ns; the Host takes ownership of ns.
func HostAt(ns netns.NsHandle) (*Host, error) { return hostOf(ns) }

func hostOf(ns netns.NsHandle) (*Host, error) {
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &Host{ns: ns, nl: nl}, nil
}

// Close releases the host's handles.
func (h *Host) Close() {
	h.nl.Close()
	h.ns.Close()
}

// EnsureBridge creates bridge b with its address and brings it up; a
// bridge left by an earlier cluster is reused.
func (h *Host) EnsureBridge(b Bridge) error {
	link, err := h.nl.LinkByName(b.Name)
	if notFound(err) {
		link = &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b.Name}}
		if err = h.nl.LinkAdd(link); err == nil {
			link, err = h.nl.LinkByName(b.Name)
		}
	}
	if err != nil {
		return fmt.Errorf("bridge %s: %w", b.Name, err)
	}
	if err := h.nl.AddrReplace(link, noDAD(b.Addr)); err != nil {
		return fmt.Errorf("address %s on bridge %s: %w", b.Addr, b.Name, err)
	}
	if err := h.nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing bridge %s up: %w", b.Name, err)
	}
	return nil
}

// AddNamespace creates namespace n and its veth pair on bridge b: eth0
// inside with n's address and a default route via the bridge's address,
// the host end a port of b with hairpin on.
func (h *Host) AddNamespace(b Bridge, n Namespace) error {
	br, err := h.nl.LinkByName(b.Name)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", b.Name, err)
	}
	ns, err := createNamed(n.Name)
	if err != nil {
		return err
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: n.Veth, MasterIndex: br.Attrs().Index},
		PeerName:      nsDevice,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := h.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s for namespace %s: %w", n.Veth, n.Name, err)
	}
	if err := h.hostPortUp(n.Veth); err != nil {
		return err
	}
	return configureInside(ns, n, b.Addr.Addr())
}

// hostPortUp turns hairpin on for a bridge port and brings it up.
func (h *Host) hostPortUp(name string) error {
	link, err := h.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("veth %s: %w", name, err)
	}
	// Hairpin: the server DNATs a NodePort connection from node i's pod to
	// a backend on node i, and br_netfilter hands that packet back to the
	// bridge (bridged DNAT) instead of routing it; a bridge never sends a
	// frame out the port it came in on unless hairpin is on, so it was
	// dropped (docs/conformance.md, "NodePort session affinity").
	if err := h.nl.LinkSetHairpin(link, true); err != nil {
		return fmt.Errorf("hairpin on %s: %w", name, err)
	}
	if err := h.nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up: %w", name, err)
	}
	return nil
}

// configureInside brings lo and eth0 up in ns, with n's address and a
// default route via gateway.
func configureInside(ns netns.NsHandle, n Namespace, gateway netip.Addr) error {
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in namespace %s: %w", n.Name, err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("lo in namespace %s: %w", n.Name, err)
	}
	eth, err := nl.LinkByName(nsDevice)
	if err == nil {
		err = nl.AddrAdd(eth, noDAD(n.Addr))
	}
	if err == nil {
		err = nl.LinkSetUp(eth)
	}
	if err == nil {
		err = nl.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.IP(gateway.AsSlice())})
	}
	if err != nil {
		return fmt.Errorf("%s %s in namespace %s: %w", nsDevice, n.Addr, n.Name, err)
	}
	return nil
}

// noDAD is addr without duplicate address detection: the addresses are
// planned, and DAD would hold each unusable for a second or two.
func noDAD(p netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Flags: unix.IFA_F_NODAD}
}

// LinkExists tells whether the host has a link named name.
func (h *Host) LinkExists(name string) bool {
	_, err := h.nl.LinkByName(name)
	return err == nil
}

// DeleteLink deletes the host's link named name, if there is one, and
// tells whether there was. Deleting a veth's host end deletes its peer
// too, whichever namespace that is in.
func (h *Host) DeleteLink(name string) (bool, error) {
	link, err := h.nl.LinkByName(name)
	if err == nil {
		err = h.nl.LinkDel(link)
	}
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting link %s: %w", name, err)
	}
	return true, nil
}

// Ports lists the links whose master is the bridge named bridge (none
// when there is no such bridge). A namespace's veth goes with the
// namespace, shortly after its last reference (the kernel tears it down
// in the background), unless something outside the harness still holds
// the namespace after its name is deleted (an open file or a mount in
// another mount namespace): then its host end stays a port of the
// bridge, and its name stays taken.
func (h *Host) Ports(bridge string) ([]netlink.Link, error) {
	br, err := h.nl.LinkByName(bridge)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", bridge, err)
	}
	links, err := h.nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	var ports []netlink.Link
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			ports = append(ports, l)
		}
	}
	return ports, nil
}

// DeletePorts deletes every port of the bridge named bridge (Ports) and
// returns the names of those it deleted; one that went meanwhile is not
// an error.
func (h *Host) DeletePorts(bridge string) ([]string, error) {
	ports, err := h.Ports(bridge)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, l := range ports {
		err := h.nl.LinkDel(l)
		if gone(err) {
			continue
		}
		if err != nil {
			return deleted, fmt.Errorf("deleting %s, a port of bridge %s: %w", l.Attrs().Name, bridge, err)
		}
		deleted = append(deleted, l.Attrs().Name)
	}
	return deleted, nil
}

// DeleteBridge deletes the bridge named name, if there is one.
func (h *Host) DeleteBridge(name string) error {
	_, err := h.DeleteLink(name)
	return err
}

// EnableIPv6Forwarding sets net.ipv6.conf.all.forwarding in the host
// namespace: the host routes between the node namespaces.
func (h *Host) EnableIPv6Forwarding() error {
	return onOwnThread(func() error {
		if err := netns.Set(h.ns); err != nil {
			return err
		}
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644)
	})
}

// RouteVia routes dst through via, a neighbour on bridge b, in the host's
// namespace (`ip -6 route replace DST via VIA dev BRIDGE`): what a
// provider's router does for a node's pod range. A route to dst already
// there is replaced.
func (h *Host) RouteVia(b Bridge, dst netip.Prefix, via netip.Addr) error {
	br, err := h.nl.LinkByName(b.Name)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", b.Name, err)
	}
	route := &netlink.Route{LinkIndex: br.Attrs().Index, Dst: ipNet(dst), Gw: net.IP(via.AsSlice())}
	if err := h.nl.RouteReplace(route); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", dst, via, b.Name, err)
	}
	return nil
}

// Route is an IPv6 route of a namespace's main table.
type Route struct {
	Dst netip.Prefix // ::/0 for the default route
	Via netip.Addr   // the zero Addr for a route without a gateway
}

// RoutesIn lists the IPv6 routes of the main table in the named
// namespace name (the host's when name is empty), as `ip -6 route show`
// does, local and multicast routes left out.
func RoutesIn(name string) ([]Route, error) {
	ns, err := netns.Get()
	if name != "" {
		ns, err = netns.GetFromName(name)
	}
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in namespace %s: %w", name, err)
	}
	defer nl.Close()
	list, err := nl.RouteList(nil, netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("routes in namespace %s: %w", name, err)
	}
	var routes []Route
	for _, r := range list {
		dst := netip.MustParsePrefix("::/0")
		if r.Dst != nil {
			addr, _ := netip.AddrFromSlice(r.Dst.IP)
			bits, _ := r.Dst.Mask.Size()
			dst = netip.PrefixFrom(addr, bits)
		}
		if dst.Addr().IsMulticast() {
			continue
		}
		var via netip.Addr
		if r.Gw != nil {
			via, _ = netip.AddrFromSlice(r.Gw)
		}
		routes = append(routes, Route{Dst: dst, Via: via})
	}
	return routes, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Masked().Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func notFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// gone tells whether err says a link is not there (any more).
func gone(err error) bool { return notFound(err) || errors.Is(err, unix.ENODEV) }

// createNamed creates the named namespace name, as `ip netns add` does.
func createNamed(name string) (netns.NsHandle, error) {
	if err := ensureRunDir(); err != nil {
		return netns.None(), err
	}
	ns := netns.None()
	err := onOwnThread(func() error {
		var err error
		ns, err = netns.NewNamed(name)
		return err
	})
	if err != nil {
		return netns.None(), fmt.Errorf("creating network namespace %s: %w", name, err)
	}
	return ns, nil
}

// onOwnThread runs fn on an OS thread of its own, which fn may move to
// another network or UTS namespace: the thread goes back to the ones it
// had afterwards, and when that fails it is retired (its goroutine ends
// locked to it, so the runtime ends the thread) rather than left to run
// other goroutines in the wrong namespace.
func onOwnThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		origUTS, err := unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening the thread's UTS namespace: %w", err)
			return
		}
		defer unix.Close(origUTS)
		err = fn()
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("restoring the thread's network namespace: %w", serr))
			return
		}
		if serr := unix.Setns(origUTS, unix.CLONE_NEWUTS); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("restoring the thread's UTS namespace: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// ensureRunDir makes RunDir a shared mount point, as `ip netns add` does,
// so that a namespace's unmount at deletion reaches every mount namespace
// that copied it (a container's, say) and the namespace really goes.
func ensureRunDir() error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return err
	}
	for bound := false; ; bound = true {
		err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		if err != unix.EINVAL || bound {
			return fmt.Errorf("making %s a shared mount: %w", RunDir, err)
		}
		// Not a mount point yet: bind it onto itself first.
		if err := unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s: %w", RunDir, err)
		}
	}
}

// ReleaseRunDir unmounts RunDir when no namespace is left in it: creating
// one made it a mount point of its own.
func ReleaseRunDir() error {
	entries, err := os.ReadDir(RunDir)
	if err != nil || len(entries) > 0 {
		return nil
	}
	for mountPoint(RunDir) {
		if err := unix.Unmount(RunDir, 0); err != nil {
			return fmt.Errorf("unmounting %s: %w", RunDir, err)
		}
	}
	return nil
}

// mountPoint tells whether path is a mount point.
func mountPoint(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && fields[4] == path {
			return true
		}
	}
	return false
}

// Namespaces lists the named namespaces whose names start with one of
// prefixes, in RunDir's order.
func Namespaces(prefixes ...string) ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		for _, p := range prefixes {
			if strings.HasPrefix(e.Name(), p) {
				names = append(names, e.Name())
				break
			}
		}
	}
	return names, nil
}

// DeleteNamespace deletes the named namespace name, as `ip netns delete`
// does; its veth pair goes with it once no process holds it.
func DeleteNamespace(name string) error {
	if err := netns.DeleteNamed(name); err != nil {
		return fmt.Errorf("deleting network namespace %s: %w", name, err)
	}
	return nil
}

// Pids lists the processes in the named namespace name, as `ip netns
// pids` does.
func Pids(name string) ([]int, error) {
	var ns unix.Stat_t
	if err := unix.Stat(filepath.Join(RunDir, name), &ns); err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/ns/net")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range procs {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino {
			var pid int
			fmt.Sscanf(p, "/proc/%d/", &pid)
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// Start starts cmd in the named namespace name (the host's when name is
// empty): it joins only the network namespace, on a thread of its own,
// and forks from there. Not `ip netns exec`, which also remounts /sys for
// the namespace, hiding the cgroup file systems the kubelet needs (the
// shell harness used nsenter --net for the same reason). A hostname gives
// cmd a UTS namespace of its own with that hostname, as a machine of its
// own has: the identities kube-controller-manager and kube-scheduler
// take in their leader Leases (hostname_uuid) then name their node.
func Start(cmd *exec.Cmd, name, hostname string) error {
	if name == "" && hostname == "" {
		return cmd.Start()
	}
	ns := netns.None()
	if name != "" {
		var err error
		if ns, err = netns.GetFromName(name); err != nil {
			return fmt.Errorf("network namespace %s: %w", name, err)
		}
		defer ns.Close()
	}
	enter := func() error {
		if hostname != "" {
			if err := enterUTS(hostname); err != nil {
				return err
			}
		}
		if name != "" {
			if err := netns.Set(ns); err != nil {
				return fmt.Errorf("joining network namespace %s: %w", name, err)
			}
		}
		return cmd.Start()
	}
	return onOwnThread(enter)
}

// enterUTS moves the calling thread into a new UTS namespace named
// hostname (onOwnThread moves it back).
func enterUTS(hostname string) error {
	if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
		return fmt.Errorf("a UTS namespace for %s: %w", hostname, err)
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("hostname %s: %w", hostname, err)
	}
	return nil
}
