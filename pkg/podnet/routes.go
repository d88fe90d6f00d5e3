package podnet

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// RouteProtocol marks the routes k1m installs to other nodes' pods (the
// rtnetlink protocol field, shown by `ip -6 route` as "proto 75"), so
// that a node can tell them from the routes of others when it removes
// the routes no published node owns.
const RouteProtocol = 75

// routeKernel is where routes go: netlink on a node, a record in tests.
type routeKernel interface {
	replace(podRoute) error
	remove(podRoute) error
	// list returns the IPv6 gateway routes of the main table, with the
	// protocol each was installed with.
	list() ([]kernelRoute, error)
}

// kernelRoute is a route found in the kernel's table.
type kernelRoute struct {
	podRoute
	protocol int
}

func (nw Network) kernelRoutes() routeKernel {
	if nw.kernel != nil {
		return nw.kernel
	}
	return netlinkRoutes{}
}

// netlinkRoutes is the kernel's main IPv6 table.
type netlinkRoutes struct{}

func (netlinkRoutes) replace(r podRoute) error {
	return netlink.RouteReplace(&netlink.Route{Dst: r.dst, Gw: r.via, Protocol: RouteProtocol})
}

func (netlinkRoutes) remove(r podRoute) error {
	return netlink.RouteDel(&netlink.Route{Dst: r.dst, Gw: r.via})
}

func (netlinkRoutes) list() ([]kernelRoute, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	var out []kernelRoute
	for _, r := range routes {
		if r.Dst != nil && r.Gw != nil {
			out = append(out, kernelRoute{podRoute{dst: r.Dst, via: r.Gw}, int(r.Protocol)})
		}
	}
	return out, nil
}

// followPublished installs the routes the servers publish as they come,
// removes a node's routes when its route ConfigMap goes, and at start and
// every resyncPeriod removes every route no published node owns and puts
// back a published one the kernel lost.
func (nw Network) followPublished(ctx context.Context, factory informers.SharedInformerFactory) {
	applied := newRouteTable()
	informer := factory.Core().V1().ConfigMaps().Informer()
	handle := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != nw.Self {
			nw.install(nw.inRange(routeOf(cm)), applied)
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
		// A Node deleted takes its route off every node at once, not
		// only at the next resync: this ConfigMap's routes alone.
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != nw.Self {
				nw.uninstall(routeOf(cm), applied)
			}
		},
	})
	factory.Start(ctx.Done())
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			return
		}
		for {
			nw.reconcile(informer.GetStore(), applied)
			select {
			case <-ctx.Done():
				return
			case <-time.After(resyncPeriod):
			}
		}
	}()
}

// inRange drops the routes outside ClusterCIDR, saying so: a server of a
// release that did not check routes might publish one.
func (nw Network) inRange(routes []podRoute) []podRoute {
	if !nw.ClusterCIDR.IsValid() {
		return routes
	}
	out := routes[:0:0]
	for _, r := range routes {
		if p, ok := prefixOf(r.dst); ok && nw.ClusterCIDR.Contains(p.Addr()) && p.Bits() >= nw.ClusterCIDR.Bits() {
			out = append(out, r)
			continue
		}
		klog.InfoS("k1m pod network: a published route outside the cluster range is not installed", "dst", r.dst, "via", r.via, "clusterCIDR", nw.ClusterCIDR)
	}
	return out
}

// uninstall removes routes this node installed for them.
func (nw Network) uninstall(routes []podRoute, applied *routeTable) {
	applied.op.Lock()
	defer applied.op.Unlock()
	for _, r := range routes {
		if !applied.holds(r) {
			continue
		}
		if err := nw.kernelRoutes().remove(r); err != nil {
			klog.ErrorS(err, "k1m pod network: removing the route of a node that is gone (removed at the next resync)", "dst", r.dst, "via", r.via)
			continue
		}
		applied.forget(r.dst.String())
		klog.InfoS("k1m pod network: removed the route of a node that is gone", "dst", r.dst, "via", r.via)
	}
}

// reconcile makes the kernel hold the routes of the ConfigMaps in store
// and no other route of this node's making. The kernel is listed before
// the store, and install waits meanwhile: a ConfigMap added after the
// store's list is installed after the removals, never removed by them.
func (nw Network) reconcile(store cache.Store, applied *routeTable) {
	applied.op.Lock()
	kernel := nw.kernelRoutes()
	have, err := kernel.list()
	if err != nil {
		klog.ErrorS(err, "k1m pod network: listing the routes (stale routes stay until the next resync)")
	}
	var want []podRoute
	for _, obj := range store.List() {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != nw.Self {
			want = append(want, nw.inRange(routeOf(cm))...)
		}
	}
	wanted, nodes, inKernel := map[string]string{}, map[string]bool{}, map[string]string{}
	for _, r := range want {
		wanted[r.dst.String()] = r.via.String()
		nodes[r.via.String()] = true
	}
	applied.pruneFailing(wanted)
	for _, r := range have {
		inKernel[r.dst.String()] = r.via.String()
		if !nw.owns(r, nodes) || wanted[r.dst.String()] == r.via.String() {
			continue
		}
		if err := kernel.remove(r.podRoute); err != nil {
			klog.ErrorS(err, "k1m pod network: removing a route no published node owns", "dst", r.dst, "via", r.via)
			continue
		}
		klog.InfoS("k1m pod network: removed a route no published node owns", "dst", r.dst, "via", r.via)
		applied.forget(r.dst.String())
	}
	// A route the kernel lost (removed by hand, its link gone) is put
	// back: forgotten, install sees it as new.
	for dst, via := range wanted {
		if err == nil && inKernel[dst] != via {
			applied.forget(dst)
		}
	}
	applied.op.Unlock()
	nw.install(want, applied)
}

// owns tells whether r is a route this node's pod network put in, or one
// an earlier release did (those carried no RouteProtocol: the kernel's
// default, "boot"): a route marked RouteProtocol; a gateway route into
// ClusterCIDR (no one else routes pod ranges here); an unmarked host
// route to a published node's own address (nodes: the published next
// hops), which only steers that node's traffic elsewhere.
func (nw Network) owns(r kernelRoute, nodes map[string]bool) bool {
	p, ok := prefixOf(r.dst)
	switch {
	case r.protocol == RouteProtocol:
		return true
	case !ok:
		return false
	case nw.ClusterCIDR.IsValid() && nw.ClusterCIDR.Contains(p.Addr()) && p.Bits() >= nw.ClusterCIDR.Bits():
		return true
	default:
		return r.protocol == unix.RTPROT_BOOT && p.IsSingleIP() && nodes[p.Addr().String()]
	}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	return netip.PrefixFrom(addr.Unmap(), bits), true
}
