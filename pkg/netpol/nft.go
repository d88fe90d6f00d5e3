package netpol

import (
	"fmt"
	"net/netip"
	"strings"
)

// Table is the nftables table a node's rules live in (family inet).
const Table = "k1m-netpol"

// Render writes the nft script that replaces the node's table with rules:
// one transaction (nft -f), so a node never runs half a policy set.
//
// The forward hook sees every packet to or from a pod on this node that
// crosses the node's routing (across nodes, and between pods on the bridge
// with bridge-nf-call-ip6tables, which podnet sets): after kube-proxy's
// DNAT, so a Service's traffic is judged by its endpoint pod. Packets of
// established connections pass; a new connection to an ingress-isolated
// pod jumps to that pod's ingress chain, one from an egress-isolated pod to
// its egress chain: each chain returns on an allowed peer and port and
// drops the rest. Traffic of the node itself to its pods (the kubelet's
// probes) goes through output, not forward, and is not judged.
func Render(rules []PodRules) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\ntable inet %s {\n", Table, Table, Table)
	sets := peerSets(&b, rules)
	var ingress, egress []string
	for i, r := range rules {
		if r.IngressIsolated {
			name := fmt.Sprintf("in-%d", i)
			writeChain(&b, name, r, "ingress", "saddr", r.Ingress, sets)
			for _, ip := range r.IPs {
				ingress = append(ingress, fmt.Sprintf("%s : jump %s", ip, name))
			}
		}
		if r.EgressIsolated {
			name := fmt.Sprintf("out-%d", i)
			writeChain(&b, name, r, "egress", "daddr", r.Egress, sets)
			for _, ip := range r.IPs {
				egress = append(egress, fmt.Sprintf("%s : jump %s", ip, name))
			}
		}
	}
	b.WriteString("\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n")
	b.WriteString("\t\tct state established,related accept\n")
	if len(ingress) > 0 {
		fmt.Fprintf(&b, "\t\tip6 daddr vmap { %s }\n", strings.Join(ingress, ", "))
	}
	if len(egress) > 0 {
		fmt.Fprintf(&b, "\t\tip6 saddr vmap { %s }\n", strings.Join(egress, ", "))
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// peerSets writes each distinct, non-empty peer list of the rules once, as
// a named interval set, and returns the set names by list.
func peerSets(b *strings.Builder, rules []PodRules) map[string]string {
	sets := map[string]string{}
	add := func(rs []Rule) {
		for _, r := range rs {
			if len(r.Peers) == 0 {
				continue
			}
			key := setKey(r.Peers)
			if _, ok := sets[key]; ok {
				continue
			}
			name := fmt.Sprintf("peers-%d", len(sets))
			sets[key] = name
			fmt.Fprintf(b, "\tset %s {\n\t\ttype ipv6_addr\n\t\tflags interval\n\t\tauto-merge\n\t\telements = { %s }\n\t}\n", name, joinPrefixes(r.Peers))
		}
	}
	for _, r := range rules {
		add(r.Ingress)
		add(r.Egress)
	}
	return sets
}

// writeChain writes a pod's chain for one direction: a return per allowed
// peer set and port, then drop. peerField is the packet's address of the
// peer (saddr for ingress, daddr for egress).
func writeChain(b *strings.Builder, name string, r PodRules, direction, peerField string, rules []Rule, sets map[string]string) {
	fmt.Fprintf(b, "\tchain %s {\n\t\tcomment %q\n", name, r.Namespace+"/"+r.Name+" "+direction)
	for _, rule := range rules {
		if rule.Peers != nil && len(rule.Peers) == 0 {
			continue // selects no peer
		}
		match := ""
		if rule.Peers != nil {
			match = fmt.Sprintf("ip6 %s @%s ", peerField, sets[setKey(rule.Peers)])
		}
		if rule.Ports == nil {
			fmt.Fprintf(b, "\t\t%sreturn\n", match)
			continue
		}
		for _, p := range rule.Ports {
			fmt.Fprintf(b, "\t\t%s%sreturn\n", match, portMatch(p))
		}
	}
	b.WriteString("\t\tdrop\n\t}\n")
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		if p.IsSingleIP() {
			s[i] = p.Addr().String()
		} else {
			s[i] = p.String()
		}
	}
	return strings.Join(s, ", ")
}

// portMatch matches a protocol and its port range.
func portMatch(p Port) string {
	proto := strings.ToLower(string(p.Protocol))
	switch {
	case p.Port == 0:
		return fmt.Sprintf("meta l4proto %s ", proto)
	case p.EndPort > p.Port:
		return fmt.Sprintf("meta l4proto %s th dport %d-%d ", proto, p.Port, p.EndPort)
	default:
		return fmt.Sprintf("meta l4proto %s th dport %d ", proto, p.Port)
	}
}
