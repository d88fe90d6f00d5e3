package server

import (
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// nodeGateways are the gateways of this server's default IPv6 routes: the
// node network's router, which no node's serving certificate may name
// (approver.ControlPlane.Gateways). Read once, when the approver starts;
// when they cannot be read that is logged and none are returned: the
// approver's other checks still hold.
func nodeGateways(warn func(format string, args ...any)) []netip.Addr {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V6)
	if err != nil {
		warn("reading the default routes' gateways: %v: kubelet serving certificates are not checked against them", err)
		return nil
	}
	return defaultGateways(routes)
}

// defaultGateways are the gateways of the default routes among routes,
// each once (a multipath route has one per next hop).
func defaultGateways(routes []netlink.Route) []netip.Addr {
	var out []netip.Addr
	add := func(gw net.IP) {
		if addr, ok := netip.AddrFromSlice(gw); ok && !slices.Contains(out, addr.Unmap()) {
			out = append(out, addr.Unmap())
		}
	}
	for _, r := range routes {
		if !isDefault(r.Dst) {
			continue
		}
		add(r.Gw)
		for _, hop := range r.MultiPath {
			add(hop.Gw)
		}
	}
	return out
}

// isDefault tells whether a route's destination is the default, ::/0
// (netlink spells it so, older releases as nil).
func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}
