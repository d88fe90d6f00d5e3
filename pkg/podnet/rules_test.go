package podnet

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testRules = RouteRules{
	ClusterCIDR: netip.MustParsePrefix("fddf:4035:b500::/48"),
	NodeMask:    64,
	ServiceCIDR: netip.MustParsePrefix("fddf:4035:b510::/108"),
}

var testServers = map[string][]netip.Addr{
	"server-1": {netip.MustParseAddr("fddf:4035:b520::1")},
	"":         {netip.MustParseAddr("fddf:4035:b520::9")},
}

// fakeOwners holds the ranges and addresses of other nodes.
type fakeOwners map[string]string

func (o fakeOwners) rangeOwner(n *corev1.Node, prefix string) string { return o[prefix] }
func (o fakeOwners) viaOwner(n *corev1.Node, addr string) string     { return o[addr] }

func nodeWith(name string, cidrs ...string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
}

// Only one /64 of the cluster range that no other node holds is a route;
// every other range is refused with the field and why.
func TestPodRangeRefusals(t *testing.T) {
	others := fakeOwners{"fddf:4035:b500:2::/64": "k1m-node-2"}
	for _, c := range []struct {
		name  string
		cidrs []string
		want  string // the range, or the refusal
	}{
		{"the IPAM's range", []string{"fddf:4035:b500:1::/64"}, "fddf:4035:b500:1::/64"},
		{"none yet", nil, "invalid Prefix"},
		{"another node's address", []string{"fddf:4035:b520::12/128"},
			"spec.podCIDRs: fddf:4035:b520::12/128 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"a /65 of another node's range", []string{"fddf:4035:b500:2::/65"},
			"spec.podCIDRs: fddf:4035:b500:2::/65 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"everything", []string{"::/0"},
			"spec.podCIDRs: ::/0 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"not the network address", []string{"fddf:4035:b500:1::5/64"},
			"spec.podCIDRs: fddf:4035:b500:1::5/64 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"IPv4", []string{"10.0.0.0/24"}, `spec.podCIDRs: "10.0.0.0/24" is not an IPv6 range`},
		{"two ranges", []string{"fddf:4035:b500:1::/64", "fddf:4035:b500:3::/64"},
			"spec.podCIDRs: fddf:4035:b500:1::/64,fddf:4035:b500:3::/64 holds 2 ranges: k1m's node IPAM allocates one IPv6 range a node"},
		{"another node's range", []string{"fddf:4035:b500:2::/64"},
			"spec.podCIDRs: fddf:4035:b500:2::/64 is node k1m-node-2's pod range, which it had first: node evil claims another node's range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, why := testRules.podRange(nodeWith("evil", c.cidrs...), testServers, others)
			got := p.String()
			if why != nil {
				got = why.String()
			}
			if got != c.want {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

// A range holding a server's address is refused, whatever the cluster
// range says (a server may sit inside a wide cluster range by mistake).
func TestPodRangeHoldingAServer(t *testing.T) {
	servers := map[string][]netip.Addr{"server-1": {netip.MustParseAddr("fddf:4035:b500:7::1")}}
	_, why := testRules.podRange(nodeWith("evil", "fddf:4035:b500:7::/64"), servers, fakeOwners{})
	want := "spec.podCIDRs: fddf:4035:b500:7::/64 holds fddf:4035:b500:7::1, the address of server server-1"
	if why == nil || why.String() != want {
		t.Errorf("got %v, want %q", why, want)
	}
}

// A next hop is the node's own: no server's (but the server's own node's),
// no other node's, no pod or Service address, nothing but global unicast.
func TestNextHopRefusals(t *testing.T) {
	others := fakeOwners{"fddf:4035:b520::11": "k1m-node-1"}
	for _, c := range []struct {
		node, addr, want string
	}{
		{"evil", "fddf:4035:b520::66", ""},
		{"evil", "fddf:4035:b520::11", "status.addresses[InternalIP]: fddf:4035:b520::11 is node k1m-node-1's address, which it had first: node evil's status claims another node's address"},
		{"evil", "fddf:4035:b520::1", "status.addresses[InternalIP]: fddf:4035:b520::1 is the address of server server-1: only that server's own node is routed through it"},
		{"server-1", "fddf:4035:b520::1", ""},
		{"evil", "fddf:4035:b520::9", "status.addresses[InternalIP]: fddf:4035:b520::9 is the address of kube-apiserver: only that server's own node is routed through it"},
		{"evil", "fddf:4035:b500:2::1", "status.addresses[InternalIP]: fddf:4035:b500:2::1 is in the cluster range fddf:4035:b500::/48 (pod addresses)"},
		{"evil", "fddf:4035:b510::1", "status.addresses[InternalIP]: fddf:4035:b510::1 is in the service range fddf:4035:b510::/108"},
		{"evil", "::1", "status.addresses[InternalIP]: ::1 is not a global unicast address"},
		{"evil", "fe80::1", "status.addresses[InternalIP]: fe80::1 is not a global unicast address"},
	} {
		why := testRules.nextHop(nodeWith(c.node), netip.MustParseAddr(c.addr), testServers, others)
		got := ""
		if why != nil {
			got = why.String()
		}
		if got != c.want {
			t.Errorf("%s via %s: got %q\nwant %q", c.node, c.addr, got, c.want)
		}
	}
}
