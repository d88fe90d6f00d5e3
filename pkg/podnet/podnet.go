// Package podnet keeps a node's pod network in line with the cluster: the
// CNI config for the node's pod range (a bridge with host-local addresses)
// and one route per other node's pod range through that node ("host-gw":
// the nodes share a link, no encapsulation). k1m agent runs it in process,
// on the routes the servers publish (PublishRoutes: one ConfigMap per node,
// written when a node joins, leaves or moves, never for a status report),
// or, when the provider's network routes each node's pod range
// (--pod-routes=provider), with no routes at all; the kind node image runs
// it as the k1m-cni DaemonSet, on the Nodes.
package podnet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"k1m.dev/k1m/pkg/fsutil"
)

// cniConfig is the node's CNI network: a bridge with the node's pod range
// (from kube-controller-manager's node IPAM) and host-local addresses.
func cniConfig(podCIDR, ipamDir string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "k1m",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "k1m0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  []any{[]any{map[string]any{"subnet": podCIDR}}},
					"routes":  []any{map[string]any{"dst": "::/0"}},
					"dataDir": ipamDir,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// podRoute is a route to another node's pods through that node.
type podRoute struct {
	dst *net.IPNet
	via net.IP
}

// podRoutes lists, for every node but self with a pod range and an IPv6
// InternalIP, the route to its pods (the nodes share one link, as on a
// flat network: "host-gw" routing, no encapsulation).
func podRoutes(nodes []*corev1.Node, self string) []podRoute {
	var routes []podRoute
	for _, n := range nodes {
		if n.Name == self {
			continue
		}
		ip := internalIPv6(n)
		if ip == nil {
			continue
		}
		for _, cidr := range n.Spec.PodCIDRs {
			_, dst, err := net.ParseCIDR(cidr)
			if err == nil && dst.IP.To4() == nil {
				routes = append(routes, podRoute{dst: dst, via: ip})
			}
		}
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].dst.String() < routes[j].dst.String() })
	return routes
}

func parseIPv6(s string) net.IP {
	if ip := net.ParseIP(s); ip != nil && ip.To4() == nil {
		return ip
	}
	return nil
}

func parseIPv6CIDR(s string) *net.IPNet {
	if _, dst, err := net.ParseCIDR(s); err == nil && dst.IP.To4() == nil {
		return dst
	}
	return nil
}

func internalIPv6(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip := net.ParseIP(a.Address); ip != nil && ip.To4() == nil {
				return ip
			}
		}
	}
	return nil
}

// Network keeps one node's CNI config and pod routes in line with the
// cluster.
type Network struct {
	Self    string // this node's name
	ConfDir string // where the CNI config goes (the kubelet's CNI conf dir)
	IPAMDir string // host-local's data directory
	Routes  RouteSource
	// ClusterCIDR, when valid, bounds the published routes a node
	// installs (a server of another release might publish one outside
	// it), and is where a gateway route no published node owns is removed
	// whatever its protocol (routes of releases that did not mark theirs).
	ClusterCIDR netip.Prefix
	// kernel installs, lists and removes routes; nil: netlink's (the
	// tests record the routes instead).
	kernel routeKernel
}

// RouteSource is where a node's routes to the other nodes' pods come from.
type RouteSource int

// The route sources.
const (
	// RoutesFromNodes: the node watches every Node (kind's k1m-cni, for a
	// few nodes and no k1m server).
	RoutesFromNodes RouteSource = iota
	// RoutesPublished: from the route ConfigMaps k1m's servers publish
	// (RoutesNamespace), and the node watches its own Node only: nothing
	// here grows with the cluster but the routes (k1m agent, --pod-routes=k1m).
	RoutesPublished
	// RoutesByProvider: none; the provider's network routes each node's
	// pod range to it. The node watches its own Node only, for its CNI
	// config, and nothing else (k1m agent, --pod-routes=provider).
	RoutesByProvider
)

// resyncPeriod is how often every Node is looked at again (the informer's
// resync), so that a route the kernel refused is tried again.
const resyncPeriod = 5 * time.Minute

// Run follows the cluster until ctx ends; it returns once the watches
// started. Each route is handled on its own when it is added, when it
// changes and at every resync: a node's event costs one route, whatever
// the cluster's size, and a status heartbeat costs nothing.
func (nw Network) Run(ctx context.Context, client kubernetes.Interface) {
	if nw.Routes == RoutesFromNodes {
		nw.runOnNodes(ctx, informers.NewSharedInformerFactory(client, resyncPeriod))
		return
	}
	// This node's own Node, by name: its pod range for the CNI config.
	nw.runOnNodes(ctx, informers.NewSharedInformerFactoryWithOptions(client, resyncPeriod,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nw.Self).String()
		})))
	if nw.Routes == RoutesByProvider {
		return
	}
	nw.followPublished(ctx, informers.NewSharedInformerFactoryWithOptions(client, resyncPeriod, informers.WithNamespace(RoutesNamespace), informers.WithTweakListOptions(routeSelector)))
}

// runOnNodes follows the Nodes factory lists: this node's CNI config, and
// the routes to the others'.
func (nw Network) runOnNodes(ctx context.Context, factory informers.SharedInformerFactory) {
	informer := factory.Core().V1().Nodes()
	applied := newRouteTable()
	handle := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			nw.apply(n, applied)
		}
	}
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle,
		UpdateFunc: func(old, updated any) {
			if routingChanged(old, updated) || resynced(old, updated) {
				handle(updated)
			}
		},
		// Routes from the Nodes (kind): a Node deleted takes its route.
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok && nw.Routes == RoutesFromNodes {
				nw.uninstall(podRoutes([]*corev1.Node{n}, nw.Self), applied)
			}
		},
	})
	factory.Start(ctx.Done())
}

// routingChanged tells whether an update of a Node changes what apply
// reads of it: its pod ranges or its IPv6 InternalIP. Most updates are
// status heartbeats, which change neither.
func routingChanged(old, updated any) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := updated.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || !internalIPv6(o).Equal(internalIPv6(n))
}

// resynced tells the informer's periodic resync (the same object again)
// from an update.
func resynced(old, updated any) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := updated.(*corev1.Node)
	return ok1 && ok2 && o.ResourceVersion == n.ResourceVersion
}

// routeTable is the routes this node installed, by destination, so that
// a route seen again with the same next hop costs no route replace.
type routeTable struct {
	// op serializes what changes the kernel's routes: installs (informer
	// events), removals and the periodic reconcile.
	op  sync.Mutex
	mu  sync.Mutex
	via map[string]string
	// failing holds the last error of each route whose install failed,
	// until it succeeds or is forgotten: a failing route is retried at
	// every change of its node, and each status report of the node is
	// one, so only a new error is logged.
	failing map[string]string
}

// holds tells whether the table holds r as it is.
func (table *routeTable) holds(r podRoute) bool {
	table.mu.Lock()
	defer table.mu.Unlock()
	return table.via[r.dst.String()] == r.via.String()
}

func newRouteTable() *routeTable {
	return &routeTable{via: map[string]string{}, failing: map[string]string{}}
}

// changed lists the routes of want that table does not hold as they are,
// and records them.
func (table *routeTable) changed(want []podRoute) []podRoute {
	table.mu.Lock()
	defer table.mu.Unlock()
	var out []podRoute
	for _, r := range want {
		dst, via := r.dst.String(), r.via.String()
		if table.via[dst] != via {
			out = append(out, r)
			table.via[dst] = via
		}
	}
	return out
}

// forget drops dst, so that it is installed again when next seen.
func (table *routeTable) forget(dst string) {
	table.mu.Lock()
	defer table.mu.Unlock()
	delete(table.via, dst)
}

// failed forgets dst, whose install failed with err, and tells whether
// err is new for it (the first failure, or another error than the last).
func (table *routeTable) failed(dst string, err error) (isNew bool) {
	table.mu.Lock()
	defer table.mu.Unlock()
	delete(table.via, dst)
	isNew = table.failing[dst] != err.Error()
	table.failing[dst] = err.Error()
	return isNew
}

// pruneFailing drops the failures of routes no longer wanted (their
// nodes gone), so that the record stays within the cluster's size.
func (table *routeTable) pruneFailing(wanted map[string]string) {
	table.mu.Lock()
	defer table.mu.Unlock()
	for dst := range table.failing {
		if _, ok := wanted[dst]; !ok {
			delete(table.failing, dst)
		}
	}
}

// installed records that dst is in the kernel, and tells whether it had
// failed before.
func (table *routeTable) installed(dst string) (recovered bool) {
	table.mu.Lock()
	defer table.mu.Unlock()
	_, recovered = table.failing[dst]
	delete(table.failing, dst)
	return recovered
}

// apply writes the CNI config when n is this node, else, when routes
// come from the Nodes, installs the route to n's pods through n if it is
// new or moved. Other sources watch this node's Node alone: another Node
// is never a route there.
func (nw Network) apply(n *corev1.Node, applied *routeTable) {
	if n.Name == nw.Self {
		if len(n.Spec.PodCIDRs) > 0 {
			if !nw.ownRangeAllowed(n.Spec.PodCIDRs[0]) {
				klog.InfoS("k1m pod network: this node's pod range is outside the cluster range: no CNI config", "podCIDR", n.Spec.PodCIDRs[0], "clusterCIDR", nw.ClusterCIDR)
				return
			}
			if err := nw.writeCNIConfig(n.Spec.PodCIDRs[0]); err != nil {
				klog.ErrorS(err, "k1m pod network: writing the CNI config")
			}
		}
		return
	}
	if nw.Routes == RoutesFromNodes {
		nw.install(podRoutes([]*corev1.Node{n}, nw.Self), applied)
	}
}

// ownRangeAllowed tells whether this node's pod range is inside
// ClusterCIDR (when known): the IPAM allocates nothing else.
func (nw Network) ownRangeAllowed(cidr string) bool {
	p, err := netip.ParsePrefix(cidr)
	return !nw.ClusterCIDR.IsValid() || (err == nil && nw.ClusterCIDR.Contains(p.Addr()) && p.Bits() >= nw.ClusterCIDR.Bits())
}

// install puts in the routes that are new or moved.
func (nw Network) install(routes []podRoute, applied *routeTable) {
	applied.op.Lock()
	defer applied.op.Unlock()
	for _, r := range applied.changed(routes) {
		dst := r.dst.String()
		if err := nw.kernelRoutes().replace(r); err != nil {
			// Tried again at the next resync or change of the node.
			if applied.failed(dst, err) {
				klog.ErrorS(err, "k1m pod network: adding the route to a node's pods (retried at each change of the node; logged again when the error changes)", "dst", r.dst, "via", r.via)
			}
			continue
		}
		if applied.installed(dst) {
			klog.InfoS("k1m pod network: added the route to a node's pods after it had failed", "dst", r.dst, "via", r.via)
		}
	}
}

// writeCNIConfig writes the config once the node has its pod range; the
// kubelet reports the node Ready only when the network is configured.
func (nw Network) writeCNIConfig(podCIDR string) error {
	conf, err := cniConfig(podCIDR, nw.IPAMDir)
	if err != nil {
		return err
	}
	path := filepath.Join(nw.ConfDir, "10-k1m.conflist")
	if old, err := os.ReadFile(path); err == nil && string(old) == string(conf) {
		return nil
	}
	klog.InfoS("k1m pod network: CNI network configured", "podCIDR", podCIDR, "path", path)
	return fsutil.WriteFile(path, conf, 0o644)
}

// EnableForwarding turns on IPv6 forwarding (pods reach other nodes
// through this one) and lets bridged pod traffic through ip6tables, so
// kube-proxy's Service rules apply between pods of one node.
func EnableForwarding() error {
	for path, value := range map[string]string{
		"/proc/sys/net/ipv6/conf/all/forwarding":        "1",
		"/proc/sys/net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("setting %s to %s: %w", path, value, err)
		}
	}
	return nil
}
