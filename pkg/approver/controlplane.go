package approver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/join"
)

// ReasonControlPlane denies a serving certificate for a name or address
// of the control plane.
const ReasonControlPlane = "ControlPlaneAddress"

// ControlPlane is what no node's serving certificate may name, whatever
// its Node status says (a node writes its own status): loopback and other
// non-unicast addresses, the service range (the kubernetes Service and
// every ClusterIP), the pod ranges (every pod's address), the node
// network's gateway, any server's address but a server's own node's, the
// API server's names and every in-cluster Service name, and the node
// names of the other servers (kube-apiserver's certificate names them).
// Kubelet serving certificates come from a CA of their own, which pods and
// agents do not trust; this is the second line.
type ControlPlane struct {
	ServiceCIDR netip.Prefix
	// ClusterCIDR is the pods' range (--cluster-cidr), cut into the
	// nodes' ranges.
	ClusterCIDR   netip.Prefix
	ClusterDomain string
	// Gateways are the gateways of the approving server's default IPv6
	// routes: the router of the node network, which the nodes send
	// everything through (none when they could not be read).
	Gateways []netip.Addr
	// Servers lists the servers' addresses by their node names; addresses
	// of an API server whose node is not known are under "".
	Servers func(ctx context.Context) (map[string][]netip.Addr, error)
}

// refuse returns why node may not have these addresses and names in a
// serving certificate, or nil.
func (cp ControlPlane) refuse(ctx context.Context, node string, ips []net.IP, dnsNames []string) (*verdict, error) {
	servers := map[string][]netip.Addr{}
	if cp.Servers != nil {
		var err error
		if servers, err = cp.Servers(ctx); err != nil {
			return nil, fmt.Errorf("listing the servers' addresses: %w", err)
		}
	}
	for _, ip := range ips {
		if why := cp.refuseIP(node, ip, servers); why != "" {
			return deny(ReasonControlPlane, "IP %s %s: a kubelet serving certificate may name only the node's own addresses", ip, why), nil
		}
	}
	for _, name := range dnsNames {
		if why := cp.refuseName(node, name, servers); why != "" {
			return deny(ReasonControlPlane, "DNS name %s %s: a kubelet serving certificate may name only the node's own names", name, why), nil
		}
	}
	return nil, nil
}

func (cp ControlPlane) refuseIP(node string, ip net.IP, servers map[string][]netip.Addr) string {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return "is not an IP address"
	}
	addr = addr.Unmap()
	switch {
	case !addr.IsGlobalUnicast():
		return "is a loopback, link-local, multicast or unspecified address"
	case cp.ServiceCIDR.IsValid() && cp.ServiceCIDR.Contains(addr):
		return fmt.Sprintf("is in the service range %s (the kubernetes Service and every ClusterIP)", cp.ServiceCIDR)
	case cp.ClusterCIDR.IsValid() && cp.ClusterCIDR.Contains(addr):
		return fmt.Sprintf("is in the cluster CIDR %s (the pods' ranges)", cp.ClusterCIDR)
	case slices.Contains(cp.Gateways, addr):
		return "is the node network's gateway (a default route's gateway of the server)"
	}
	for server, addrs := range servers {
		if server != node && slices.Contains(addrs, addr) {
			if server == "" {
				return "is an address of kube-apiserver"
			}
			return "is an address of server " + server
		}
	}
	return ""
}

func (cp ControlPlane) refuseName(node, name string, servers map[string][]netip.Addr) string {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	domain := strings.ToLower(strings.Trim(cp.ClusterDomain, "."))
	switch {
	case strings.Contains(name, "*"):
		return "is a wildcard"
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return "is loopback"
	case name == "kubernetes" || name == "kubernetes.default" || strings.HasSuffix(name, ".svc") || strings.Contains(name, ".svc."):
		return "is a Service name (kube-apiserver's certificate names kubernetes.default.svc)"
	case domain != "" && (name == domain || strings.HasSuffix(name, "."+domain)):
		return "is in the cluster domain " + domain
	}
	if _, isServer := servers[name]; isServer && name != node {
		return "is the node name of server " + name + ", which kube-apiserver's certificate names"
	}
	return ""
}

// ServersOf lists the servers of the cluster client reaches: self (this
// server's node name) with its own addresses, every server published in
// kube-system/k1m-server-bootstrap with its API address, and the
// addresses of the kubernetes Service's endpoints under "" unless a server
// above has them.
func ServersOf(client kubernetes.Interface, self string, selfAddrs []netip.Addr) func(context.Context) (map[string][]netip.Addr, error) {
	return func(ctx context.Context) (map[string][]netip.Addr, error) {
		out := map[string][]netip.Addr{self: slices.Clone(selfAddrs)}
		published, err := join.PublishedServers(ctx, client)
		if err != nil {
			return nil, err
		}
		for node, apiURL := range published {
			if addr, ok := urlAddr(apiURL); ok {
				out[node] = append(out[node], addr)
			}
		}
		eps, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
		if err != nil {
			return nil, err
		}
		for _, s := range eps.Items {
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					if addr, err := netip.ParseAddr(a); err == nil && !known(out, addr.Unmap()) {
						out[""] = append(out[""], addr.Unmap())
					}
				}
			}
		}
		return out, nil
	}
}

func known(servers map[string][]netip.Addr, addr netip.Addr) bool {
	for _, addrs := range servers {
		if slices.Contains(addrs, addr) {
			return true
		}
	}
	return false
}

func urlAddr(apiURL string) (netip.Addr, bool) {
	u, err := url.Parse(apiURL)
	if err != nil {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(u.Hostname())
	return addr.Unmap(), err == nil
}
