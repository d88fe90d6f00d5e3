package server

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// The default routes' gateways, each once, a multipath route's every next
// hop, whether netlink spells the default ::/0 or nil; other routes'
// gateways are not the node network's router.
func TestDefaultGateways(t *testing.T) {
	_, all, _ := net.ParseCIDR("::/0")
	_, pods, _ := net.ParseCIDR("fddf:4035:b500:2::/64")
	routes := []netlink.Route{
		{Dst: all, Gw: net.ParseIP("fd00::1")},
		{Dst: nil, Gw: net.ParseIP("fd00::1")},
		{Dst: all, MultiPath: []*netlink.NexthopInfo{{Gw: net.ParseIP("fd00::2")}, {Gw: net.ParseIP("fd00::3")}}},
		{Dst: pods, Gw: net.ParseIP("fddf:4035:b520::12")},
	}
	want := []netip.Addr{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::3")}
	if got := defaultGateways(routes); !slices.Equal(got, want) {
		t.Errorf("gateways %v, want %v", got, want)
	}
}
