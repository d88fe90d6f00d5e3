package netpol

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

func renderedCase() []PodRules {
	return []PodRules{
		{Namespace: "prod", Name: "web-1", IPs: addrs("fddf:1::10"), IngressIsolated: true,
			Ingress: []Rule{{Peers: prefixes("fddf:2::20/128", "fddf:5::/64"), Ports: []Port{{Protocol: tcp, Port: 8080}, {Protocol: udp, Port: 9000, EndPort: 9010}}},
				{Peers: []netip.Prefix{}}}},
		{Namespace: "dev", Name: "client", IPs: addrs("fddf:1::20"), EgressIsolated: true,
			Egress: []Rule{{Ports: []Port{{Protocol: udp, Port: 53}}}, {Peers: prefixes("fddf:3::/64")}}},
	}
}

func TestRender(t *testing.T) {
	got := Render(renderedCase())
	want := `table inet k1m-netpol
delete table inet k1m-netpol
table inet k1m-netpol {
	set peers-0 {
		type ipv6_addr
		flags interval
		auto-merge
		elements = { fddf:2::20, fddf:5::/64 }
	}
	set peers-1 {
		type ipv6_addr
		flags interval
		auto-merge
		elements = { fddf:3::/64 }
	}
	chain in-0 {
		comment "prod/web-1 ingress"
		ip6 saddr @peers-0 meta l4proto tcp th dport 8080 return
		ip6 saddr @peers-0 meta l4proto udp th dport 9000-9010 return
		drop
	}
	chain out-1 {
		comment "dev/client egress"
		meta l4proto udp th dport 53 return
		ip6 daddr @peers-1 return
		drop
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		ct state established,related accept
		ip6 daddr vmap { fddf:1::10 : jump in-0 }
		ip6 saddr vmap { fddf:1::20 : jump out-1 }
	}
}
`
	if got != want {
		t.Errorf("Render:\n%s\nwant:\n%s", got, want)
	}
}

// nft itself parses the script (a dry run, -c, changes nothing).
func TestRenderParsesWithNft(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	for _, rules := range [][]PodRules{nil, renderedCase()} {
		cmd := exec.Command("nft", "-c", "-f", "-")
		cmd.Stdin = strings.NewReader(Render(rules))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("nft -c: %v: %s\n%s", err, out, Render(rules))
		}
	}
}
