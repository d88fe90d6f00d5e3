package server

import (
	"net"
	"net/netip"
	"slices"
	"testing"
)

func TestHostAddressesLeaveThePodNetworkOut(t *testing.T) {
	a := netip.MustParseAddr
	cluster, service := netip.MustParsePrefix("fddf:4035:b500::/56"), netip.MustParsePrefix("fddf:4035:b510::/112")
	global := []netip.Addr{
		a("fddf:4035:b520::1:2"), // the node's address
		a("fddf:4035:b500:1::1"), // its pod range's gateway on the bridge, after a restart
		a("fddf:4035:b510::10"),  // an address in the service range
		a("2001:db8::7"),         // another of the host's
		a("2001:db8::7"),         // listed twice
	}
	got := hostAddresses(global, a("fddf:4035:b520::1:2"), a("2001:db8::9"), cluster, service)
	want := []net.IP{net.ParseIP("fddf:4035:b520::1:2"), net.ParseIP("2001:db8::7"), net.ParseIP("2001:db8::9")}
	if !slices.EqualFunc(got, want, net.IP.Equal) {
		t.Errorf("hostAddresses = %v, want %v", got, want)
	}
}
