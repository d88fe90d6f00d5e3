package localcluster

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/test/localcluster/network"
)

// The provider's router: with PodRoutes provider the nodes install no
// routes to each other's pods, and the host, every node namespace's
// default gateway, routes each node's pod range via the node's address on
// the bridge, as a cloud's network routes each node's prefix to it.

// rangesJSONPath prints each node's name, pod ranges and InternalIP
// addresses, tab separated, one node a line.
const rangesJSONPath = `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.spec.podCIDRs[*]}{"\t"}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}`

// nodeRange is one pod range of a node and the node's address.
type nodeRange struct {
	Node  string
	Range netip.Prefix
	Via   netip.Addr
}

// nodeRangesOf reads kubectl's rangesJSONPath output: every IPv6 pod
// range of each node with an IPv6 InternalIP, in the output's order; a
// node without a range (node IPAM has not got to it yet) or an address
// is left out.
func nodeRangesOf(out string) []nodeRange {
	var ranges []nodeRange
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		var via netip.Addr
		for _, a := range strings.Fields(f[2]) {
			if addr, err := netip.ParseAddr(a); err == nil && addr.Is6() && !addr.Is4In6() {
				via = addr
				break
			}
		}
		if !via.IsValid() {
			continue
		}
		for _, cidr := range strings.Fields(f[1]) {
			if p, err := netip.ParsePrefix(cidr); err == nil && p.Addr().Is6() && !p.Addr().Is4In6() {
				ranges = append(ranges, nodeRange{Node: f[0], Range: p.Masked(), Via: via})
			}
		}
	}
	return ranges
}

// RouteNodeRanges routes, in the host's namespace, each Node's pod range
// via the node's address on the bridge (`ip -6 route replace RANGE via
// NODE-IP dev k1m-nodes`); Up runs it while the nodes get their ranges
// and once every node is Ready. The host's own node (a lone server's,
// at the bridge's address) is left out: its pods are local. Nothing is
// done when the cluster's pod routes are k1m's.
func (c *Cluster) RouteNodeRanges(ctx context.Context) error {
	if c.opts.PodRoutes != constants.PodRoutesProvider {
		return nil
	}
	out, err := c.kubectl(ctx, c.plan.Servers[0].AdminKubeconfig(), "get", "nodes", "-o", rangesJSONPath)
	if err != nil {
		return fmt.Errorf("the provider's router: listing the nodes' pod ranges: %w", err)
	}
	host, err := network.CurrentHost()
	if err != nil {
		return err
	}
	defer host.Close()
	bridge := c.plan.Bridge
	for _, r := range nodeRangesOf(string(out)) {
		if r.Via == bridge.Addr.Addr() || !bridge.Addr.Contains(r.Via) || c.routed[r.Range] == r.Via {
			continue
		}
		if err := host.RouteVia(bridge, r.Range, r.Via); err != nil {
			return fmt.Errorf("the provider's router: %w", err)
		}
		c.routed[r.Range] = r.Via
		c.logf("the provider's router: %s via %s dev %s (node %s's pod range)", r.Range, r.Via, bridge.Name, r.Node)
	}
	return nil
}
