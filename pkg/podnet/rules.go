package podnet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// RouteRules are what a published route must satisfy. A node writes its
// own Node: its status addresses at any time, and (NodeRestriction lets
// it) its pod ranges when it creates the Node. A route is a next hop every
// node and server installs, so the publisher believes of a Node only what
// no other node already holds and what the control plane allocated:
//
//   - the pod range: exactly one IPv6 node range (NodeMask bits) inside
//     ClusterCIDR, as kube-controller-manager's node IPAM cuts them, not
//     overlapping the service range, holding no server's address, and not
//     another node's range;
//   - the next hop: the node's IPv6 InternalIP as first published after
//     its join, kept for the life of its Node (a later status claiming
//     another address does not move the route), global unicast, outside
//     the cluster and service ranges, not a server's address (but for the
//     server's own node), and no other node's.
//
// Where two nodes claim one range or address, the one that published it
// first keeps it, then the Node created first.
type RouteRules struct {
	ClusterCIDR netip.Prefix
	NodeMask    int
	ServiceCIDR netip.Prefix
	// Servers lists the servers' addresses by their node names (those of
	// an API server whose node is not known under ""); nil: none.
	Servers func(ctx context.Context) (map[string][]netip.Addr, error)
}

// refusal is why part of a Node is not routed: the field and the reason.
type refusal struct {
	field, why string
}

func (r *refusal) String() string { return r.field + ": " + r.why }

// Fields named in refusals.
const (
	fieldPodCIDRs   = "spec.podCIDRs"
	fieldInternalIP = "status.addresses[InternalIP]"
)

// owners tells which other node holds a pod range or next hop first, from
// the publisher's caches; "" when none does.
type owners interface {
	rangeOwner(n *corev1.Node, prefix string) string
	viaOwner(n *corev1.Node, addr string) string
}

// podRange is n's one routable pod range, or none yet (no refusal) when
// the IPAM has not allocated it.
func (r RouteRules) podRange(n *corev1.Node, servers map[string][]netip.Addr, own owners) (netip.Prefix, *refusal) {
	switch len(n.Spec.PodCIDRs) {
	case 0:
		return netip.Prefix{}, nil
	case 1:
	default:
		return netip.Prefix{}, &refusal{fieldPodCIDRs, fmt.Sprintf("%s holds %d ranges: k1m's node IPAM allocates one IPv6 range a node", strings.Join(n.Spec.PodCIDRs, ","), len(n.Spec.PodCIDRs))}
	}
	raw := n.Spec.PodCIDRs[0]
	p, err := netip.ParsePrefix(raw)
	switch {
	case err != nil || !p.Addr().Is6() || p.Addr().Is4In6():
		return netip.Prefix{}, &refusal{fieldPodCIDRs, fmt.Sprintf("%q is not an IPv6 range", raw)}
	case p != p.Masked() || p.Bits() != r.NodeMask || !r.ClusterCIDR.Contains(p.Addr()):
		return netip.Prefix{}, &refusal{fieldPodCIDRs, fmt.Sprintf("%s is not a /%d node range inside the cluster range %s: only kube-controller-manager's node IPAM allocation is routed", raw, r.NodeMask, r.ClusterCIDR)}
	case r.ServiceCIDR.IsValid() && p.Overlaps(r.ServiceCIDR):
		return netip.Prefix{}, &refusal{fieldPodCIDRs, fmt.Sprintf("%s overlaps the service range %s", raw, r.ServiceCIDR)}
	}
	for _, server := range sortedNames(servers) {
		for _, a := range servers[server] {
			if p.Contains(a) {
				return netip.Prefix{}, &refusal{fieldPodCIDRs, fmt.Sprintf("%s holds %s, the address of %s", raw, a, serverLabel(server))}
			}
		}
	}
	if other := own.rangeOwner(n, p.String()); other != "" {
		return netip.Prefix{}, &refusal{fieldPodCIDRs, fmt.Sprintf("%s is node %s's pod range, which it had first: node %s claims another node's range", raw, other, n.Name)}
	}
	return p, nil
}

// nextHop checks addr as n's next hop before it is bound.
func (r RouteRules) nextHop(n *corev1.Node, addr netip.Addr, servers map[string][]netip.Addr, own owners) *refusal {
	refuse := func(format string, args ...any) *refusal {
		return &refusal{fieldInternalIP, fmt.Sprintf("%s ", addr) + fmt.Sprintf(format, args...)}
	}
	switch {
	case !addr.IsGlobalUnicast():
		return refuse("is not a global unicast address")
	case r.ClusterCIDR.Contains(addr):
		return refuse("is in the cluster range %s (pod addresses)", r.ClusterCIDR)
	case r.ServiceCIDR.IsValid() && r.ServiceCIDR.Contains(addr):
		return refuse("is in the service range %s", r.ServiceCIDR)
	}
	for _, server := range sortedNames(servers) {
		if server != n.Name && slices.Contains(servers[server], addr) {
			return refuse("is the address of %s: only that server's own node is routed through it", serverLabel(server))
		}
	}
	if other := own.viaOwner(n, addr.String()); other != "" {
		return refuse("is node %s's address, which it had first: node %s's status claims another node's address", other, n.Name)
	}
	return nil
}

func serverLabel(name string) string {
	if name == "" {
		return "kube-apiserver"
	}
	return "server " + name
}

func sortedNames(m map[string][]netip.Addr) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// internalAddr is n's IPv6 InternalIP, if any.
func internalAddr(n *corev1.Node) (netip.Addr, bool) {
	ip := internalIPv6(n)
	if ip == nil {
		return netip.Addr{}, false
	}
	addr, ok := netip.AddrFromSlice(ip)
	return addr.Unmap(), ok
}

// serversEvery is how long the servers' addresses are kept between
// lookups: a lookup is a GET and a LIST, and the publisher checks a route
// at every join; servers change far more rarely than nodes join.
const serversEvery = 10 * time.Second

// cachedServers looks the servers up at most once every serversEvery.
type cachedServers struct {
	lookup func(ctx context.Context) (map[string][]netip.Addr, error)
	now    func() time.Time

	mu      sync.Mutex
	at      time.Time
	servers map[string][]netip.Addr
}

func (c *cachedServers) get(ctx context.Context) (map[string][]netip.Addr, error) {
	if c.lookup == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers != nil && c.now().Sub(c.at) < serversEvery {
		return c.servers, nil
	}
	servers, err := c.lookup(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the servers' addresses: %w", err)
	}
	c.servers, c.at = servers, c.now()
	return servers, nil
}
