package approver

import (
	"errors"
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"k1m.dev/k1m/pkg/podnet"
)

// The Node cache. A node writes its own status, so an address or DNS
// name there proves nothing alone: node A can copy node B's. What is a
// node's alone is what no other Node had first, and never another Node's
// name. Every Node is needed for that, hence an informer, not a request.
//
// Cost per serving request, at k1m's 100,000 nodes: no API request (the
// requester's Node and the owners of each name and address are read from
// this cache; the GET of the Node this replaced is gone), a map lookup
// per name and address asked for. Cost per approver: one watch of the
// Nodes, on the elected approver only. Memory: one stripped Node per node
// (name, UID, creation time, status addresses) with its key in the cache
// and its index entries: 1.3 KB for a node with an InternalIP and its name
// as Hostname, 736 bytes of it the (mostly empty) corev1.Node struct;
// each further address adds about 0.4 KB (measured: 100,000 such nodes
// grow the heap by 130 MB, 170 MB with an ExternalIP each).

// Indexes of the Node cache: the Nodes whose status lists an IP (as
// netip prints it) or a DNS name (lower case, no final dot).
const (
	nodeByIP  = "nodeByIP"
	nodeByDNS = "nodeByDNS"
)

// nodeIndexers are the Node cache's indexes.
var nodeIndexers = cache.Indexers{nodeByIP: indexNodeIPs, nodeByDNS: indexNodeDNS}

// Reasons for a name or address of another node.
const (
	// ReasonAddressOfAnotherNode: another Node's status listed the IP or
	// DNS name first.
	ReasonAddressOfAnotherNode = "AddressOfAnotherNode"
	// ReasonNameOfAnotherNode: the DNS name is another Node's name.
	ReasonNameOfAnotherNode = "NameOfAnotherNode"
)

// stripNode keeps of a Node what ownership needs: the approver holds
// every Node of the cluster.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, CreationTimestamp: n.CreationTimestamp},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

func indexNodeIPs(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, ok := ipKey(net.ParseIP(a.Address)); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

func indexNodeDNS(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			// A Node's own name (the usual Hostname) is left out: a
			// name that is a Node's is looked up as such, and the index
			// entry would cost each node some 300 bytes.
			if key := dnsKey(a.Address); key != n.Name {
				out = append(out, key)
			}
		}
	}
	return out, nil
}

// ipKey spells an IP one way (an IPv4-mapped address as IPv4).
func ipKey(ip net.IP) (string, bool) {
	addr, ok := netip.AddrFromSlice(ip)
	return addr.Unmap().String(), ok
}

// dnsKey spells a DNS name one way: DNS names are case-insensitive.
func dnsKey(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// cachedNode is the named Node from the cache (nil: not there yet).
func (a *Approver) cachedNode(name string) (*corev1.Node, error) {
	if a.nodes == nil {
		return nil, errors.New("the approver's Node cache is not running")
	}
	obj, ok, err := a.nodes.GetByKey(name)
	if err != nil || !ok {
		return nil, err
	}
	return obj.(*corev1.Node), nil
}

// ownedBefore is the first of the other Nodes whose status lists key (in
// index) if it came before node, else nil.
func (a *Approver) ownedBefore(index, key string, node *corev1.Node) (*corev1.Node, error) {
	objs, err := a.nodes.ByIndex(index, key)
	if err != nil {
		return nil, err
	}
	var first *corev1.Node
	for _, o := range objs {
		other := o.(*corev1.Node)
		if other.Name != node.Name && podnet.CreatedBefore(other, node) && (first == nil || podnet.CreatedBefore(other, first)) {
			first = other
		}
	}
	return first, nil
}

// refuseOthers returns why node may not have these IPs and DNS names in a
// serving certificate because they are another Node's, or nil.
func (a *Approver) refuseOthers(node *corev1.Node, ips []net.IP, dnsNames []string) (*verdict, error) {
	for _, ip := range ips {
		key, _ := ipKey(ip)
		switch bound := a.boundTo(key); {
		case bound == node.Name:
			continue // routed through it since its join: its own
		case bound != "":
			return deny(ReasonAddressOfAnotherNode, "IP %s is the address node %s is routed through since its join: node %s's status claims node %s's address", ip, bound, node.Name, bound), nil
		}
		owner, err := a.ownedBefore(nodeByIP, key, node)
		if err != nil || owner != nil {
			return ownedBy(owner, node, "IP "+ip.String(), "an address", "address"), err
		}
	}
	for _, name := range dnsNames {
		key := dnsKey(name)
		if key == node.Name {
			continue // its own name, whoever else lists it
		}
		other, err := a.cachedNode(key)
		if err != nil {
			return nil, err
		}
		if other != nil {
			return deny(ReasonNameOfAnotherNode, "DNS name %s is the name of node %s: node %s may not name another node in its serving certificate", name, other.Name, node.Name), nil
		}
		owner, err := a.ownedBefore(nodeByDNS, key, node)
		if err != nil || owner != nil {
			return ownedBy(owner, node, "DNS name "+name, "a name", "name"), err
		}
	}
	return nil, nil
}

// ownedBy denies node what owner had first (nil when owner is).
func ownedBy(owner, node *corev1.Node, what, aKind, kind string) *verdict {
	if owner == nil {
		return nil
	}
	return deny(ReasonAddressOfAnotherNode, "%s is %s of node %s, which had it first: node %s's status claims node %s's %s",
		what, aKind, owner.Name, node.Name, owner.Name, kind)
}

// routeByAddress indexes the pod routes by the address each binds.
const routeByAddress = "routeByAddress"

var routeIndexers = cache.Indexers{routeByAddress: indexRouteAddress}

func indexRouteAddress(obj any) ([]string, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		if addr, _, ok := podnet.BoundAddress(cm); ok {
			return []string{addr.String()}, nil
		}
	}
	return nil, nil
}

// boundTo names the node the pod route publisher bound addr to at its
// join (a route ConfigMap for the Node of that UID), or "". That binding
// is who had the address first, whatever the Nodes' creation times: an
// older node copying a newer one's InternalIP into its status is refused.
func (a *Approver) boundTo(addr string) string {
	if a.routes == nil {
		return ""
	}
	cms, _ := a.routes.ByIndex(routeByAddress, addr)
	for _, obj := range cms {
		cm := obj.(*corev1.ConfigMap)
		_, uid, _ := podnet.BoundAddress(cm)
		if n, err := a.cachedNode(cm.Name); err == nil && n != nil && n.UID == uid {
			return cm.Name
		}
	}
	return ""
}
