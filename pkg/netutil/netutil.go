// Package netutil finds this machine's IPv6 addresses and checks ports.
package netutil

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// DefaultIPv6 is the source address the kernel picks for the IPv6 default
// route (no packet is sent).
func DefaultIPv6() (netip.Addr, error) {
	conn, err := net.Dial("udp6", "[2001:db8::1]:53")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no IPv6 default route to take the node IP from (%v): give --node-ip", err)
	}
	defer conn.Close()
	addr := conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
	return addr.Unmap(), nil
}

// GlobalIPv6 lists the machine's global IPv6 addresses (serving
// certificates name them all, so the server answers on any of them).
func GlobalIPv6() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		prefix, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := prefix.Addr()
		if ip.Is6() && !ip.Is4In6() && ip.IsGlobalUnicast() {
			out = append(out, ip)
		}
	}
	return out, nil
}

// NodeIdentity fills in a node's name (default: the hostname, lowercased,
// as the kubelet does) and IPv6 address (default: DefaultIPv6).
func NodeIdentity(name, ip string) (string, string, error) {
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			return "", "", fmt.Errorf("--node-name: cannot read the hostname (%v): give --node-name", err)
		}
		name = strings.ToLower(host)
	}
	if ip == "" {
		addr, err := DefaultIPv6()
		if err != nil {
			return "", "", err
		}
		ip = addr.String()
	}
	return name, ip, nil
}
