// Package netpol compiles NetworkPolicies into what each node must enforce:
// for every pod a policy selects, the addresses and ports it may receive
// from and send to. The compiler runs once, on a server, over the cluster's
// Pods, Namespaces and NetworkPolicies; a node then reads only the rules of
// its own pods, never the cluster's pods (whose watch by every node would
// cost N x P).
//
// The semantics are networking.k8s.io/v1's: a pod selected by a policy of
// type Ingress (Egress) is isolated in that direction and accepts only what
// one of those policies' rules allows; a rule's peers are pods (by
// podSelector in the policy's namespace, or namespaceSelector, or both)
// and ipBlocks (a CIDR less its excepts); its ports are protocols and port
// numbers, ranges (endPort), or container port names, which name the
// destination pod's port: the selected pod's for ingress, each peer pod's
// for egress. Pods on the host network are neither selected nor peers by
// selector.
package netpol

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Port is a protocol and a port range; Port 0 is every port of Protocol.
type Port struct {
	Protocol corev1.Protocol
	Port     int32
	EndPort  int32 // 0: Port alone
}

// Rule allows traffic with any of Peers on any of Ports.
type Rule struct {
	// Peers are the addresses allowed; nil is every address (a rule
	// without peers), empty is none (selectors that select no pod).
	Peers []netip.Prefix
	// Ports are the ports allowed; nil is every port.
	Ports []Port
}

// PodRules is what a node enforces for one pod.
type PodRules struct {
	Namespace, Name string
	IPs             []netip.Addr
	// IngressIsolated and EgressIsolated: a policy selects the pod for
	// that direction; then only the rules' traffic is allowed.
	IngressIsolated, EgressIsolated bool
	Ingress, Egress                 []Rule
}

// Cluster is the compiler's input.
type Cluster struct {
	Pods       []*corev1.Pod
	Namespaces []*corev1.Namespace
	Policies   []*networkingv1.NetworkPolicy
}

// Compile returns the rules of every pod a policy selects, by node name,
// each node's pods in namespace and name order. A policy whose selector
// does not parse is an error naming it (the API server validates them, so
// this is a bug or a corrupt object).
func Compile(c Cluster) (map[string][]PodRules, error) {
	idx := newIndex(c)
	out := map[string][]PodRules{}
	for _, pod := range idx.pods {
		r, selected, err := idx.rulesOf(pod)
		if err != nil {
			return nil, err
		}
		if selected {
			out[pod.pod.Spec.NodeName] = append(out[pod.pod.Spec.NodeName], r)
		}
	}
	return out, nil
}

// podEntry is a pod with its parsed addresses.
type podEntry struct {
	pod *corev1.Pod
	ips []netip.Addr
}

type index struct {
	pods       []podEntry
	namespaces map[string]labels.Set
	policies   map[string][]*networkingv1.NetworkPolicy // by namespace
	// A rule's peers depend on the rule alone, not on the pod it is
	// compiled for: each is resolved once per compilation (a scan of the
	// pods), not once per selected pod.
	ingressPeers map[ruleKey][]netip.Prefix
	egress       map[ruleKey][]Rule
}

// ruleKey names a rule of a policy.
type ruleKey struct {
	policy *networkingv1.NetworkPolicy
	rule   int
}

func newIndex(c Cluster) *index {
	idx := &index{namespaces: map[string]labels.Set{}, policies: map[string][]*networkingv1.NetworkPolicy{},
		ingressPeers: map[ruleKey][]netip.Prefix{}, egress: map[ruleKey][]Rule{}}
	for _, ns := range c.Namespaces {
		idx.namespaces[ns.Name] = labels.Set(ns.Labels)
	}
	// In name order, so that the same cluster compiles to the same rules
	// (the publisher writes only what changed).
	policies := slices.Clone(c.Policies)
	slices.SortFunc(policies, func(a, b *networkingv1.NetworkPolicy) int { return compareNames(a.ObjectMeta, b.ObjectMeta) })
	for _, p := range policies {
		idx.policies[p.Namespace] = append(idx.policies[p.Namespace], p)
	}
	pods := slices.Clone(c.Pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return compareNames(a.ObjectMeta, b.ObjectMeta) })
	for _, pod := range pods {
		if pod.Spec.HostNetwork || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		var ips []netip.Addr
		for _, ip := range pod.Status.PodIPs {
			// IPv6 only: the rules are IPv6 sets and maps.
			if a, err := netip.ParseAddr(ip.IP); err == nil && a.Unmap().Is6() {
				ips = append(ips, a.Unmap())
			}
		}
		idx.pods = append(idx.pods, podEntry{pod: pod, ips: ips})
	}
	return idx
}

func compareNames(a, b metav1.ObjectMeta) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// rulesOf compiles pod's rules; selected is false when no policy selects it.
func (idx *index) rulesOf(e podEntry) (PodRules, bool, error) {
	pod := e.pod
	r := PodRules{Namespace: pod.Namespace, Name: pod.Name, IPs: e.ips}
	selected := false
	for _, p := range idx.policies[pod.Namespace] {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			return r, false, fmt.Errorf("NetworkPolicy %s/%s: podSelector: %w", p.Namespace, p.Name, err)
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		ingress, egress := policyTypes(p)
		if ingress {
			selected, r.IngressIsolated = true, true
			for i, rule := range p.Spec.Ingress {
				compiled, err := idx.ingressRule(ruleKey{p, i}, rule, pod)
				if err != nil {
					return r, false, err
				}
				r.Ingress = append(r.Ingress, compiled)
			}
		}
		if egress {
			selected, r.EgressIsolated = true, true
			for i, rule := range p.Spec.Egress {
				compiled, err := idx.egressRules(ruleKey{p, i}, rule)
				if err != nil {
					return r, false, err
				}
				r.Egress = append(r.Egress, compiled...)
			}
		}
	}
	return r, selected, nil
}

// policyTypes are a policy's directions: as given, else Ingress, and
// Egress when it has egress rules (the API's defaulting).
func policyTypes(p *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	return slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress), slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

// ingressRule compiles an ingress rule of p for the selected pod target:
// its named ports are target's.
func (idx *index) ingressRule(key ruleKey, rule networkingv1.NetworkPolicyIngressRule, target *corev1.Pod) (Rule, error) {
	peers, ok := idx.ingressPeers[key]
	if !ok {
		var err error
		if peers, err = idx.peers(key.policy, rule.From); err != nil {
			return Rule{}, err
		}
		idx.ingressPeers[key] = peers
	}
	return Rule{Peers: peers, Ports: resolvePorts(rule.Ports, target)}, nil
}

// egressRules compiles an egress rule of p. Without named ports it is one
// rule; with them, the named ports resolve against each peer pod, so each
// peer pod gets a rule of its own ports (ipBlock peers match no name).
func (idx *index) egressRules(key ruleKey, rule networkingv1.NetworkPolicyEgressRule) ([]Rule, error) {
	if rules, ok := idx.egress[key]; ok {
		return rules, nil
	}
	rules, err := idx.compileEgress(key.policy, rule)
	if err != nil {
		return nil, err
	}
	idx.egress[key] = rules
	return rules, nil
}

func (idx *index) compileEgress(p *networkingv1.NetworkPolicy, rule networkingv1.NetworkPolicyEgressRule) ([]Rule, error) {
	if !hasNamedPort(rule.Ports) {
		peers, err := idx.peers(p, rule.To)
		if err != nil {
			return nil, err
		}
		return []Rule{{Peers: peers, Ports: resolvePorts(rule.Ports, nil)}}, nil
	}
	numeric := Rule{Ports: resolvePorts(rule.Ports, nil)}
	var out []Rule
	pods, blocks, any, err := idx.peerParts(p, rule.To)
	if err != nil {
		return nil, err
	}
	if any {
		// Every address: numeric ports for all, named ports per pod.
		numeric.Peers = nil
		pods = idx.pods
	} else {
		numeric.Peers = append(podPrefixes(pods), blocks...)
	}
	if len(numeric.Ports) > 0 {
		out = append(out, numeric)
	}
	for _, peer := range pods {
		if named := namedPorts(rule.Ports, peer.pod); len(named) > 0 {
			out = append(out, Rule{Peers: podPrefixes([]podEntry{peer}), Ports: named})
		}
	}
	return out, nil
}

// peers are the addresses a rule's peers name: nil for none given (every
// address).
func (idx *index) peers(p *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer) ([]netip.Prefix, error) {
	pods, blocks, any, err := idx.peerParts(p, peers)
	if err != nil || any {
		return nil, err
	}
	out := append(podPrefixes(pods), blocks...)
	if out == nil {
		out = []netip.Prefix{}
	}
	return out, nil
}

// peerParts resolves peers into pods and ipBlock prefixes; any is true
// for a rule without peers.
func (idx *index) peerParts(p *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer) (pods []podEntry, blocks []netip.Prefix, any bool, err error) {
	if len(peers) == 0 {
		return nil, nil, true, nil
	}
	seen := map[*corev1.Pod]bool{}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			b, err := ipBlock(peer.IPBlock)
			if err != nil {
				return nil, nil, false, fmt.Errorf("NetworkPolicy %s/%s: %w", p.Namespace, p.Name, err)
			}
			blocks = append(blocks, b...)
			continue
		}
		match, err := idx.peerMatcher(p, peer)
		if err != nil {
			return nil, nil, false, err
		}
		for _, e := range idx.pods {
			if !seen[e.pod] && match(e.pod) {
				seen[e.pod] = true
				pods = append(pods, e)
			}
		}
	}
	return pods, blocks, false, nil
}

// peerMatcher matches the pods of a podSelector and/or namespaceSelector
// peer: without a namespaceSelector, pods of the policy's namespace.
func (idx *index) peerMatcher(p *networkingv1.NetworkPolicy, peer networkingv1.NetworkPolicyPeer) (func(*corev1.Pod) bool, error) {
	podSel, nsSel := labels.Everything(), labels.Selector(nil)
	var err error
	if peer.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
			return nil, fmt.Errorf("NetworkPolicy %s/%s: peer podSelector: %w", p.Namespace, p.Name, err)
		}
	}
	if peer.NamespaceSelector != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("NetworkPolicy %s/%s: peer namespaceSelector: %w", p.Namespace, p.Name, err)
		}
	}
	return func(pod *corev1.Pod) bool {
		if nsSel == nil {
			if pod.Namespace != p.Namespace {
				return false
			}
		} else if nsLabels, ok := idx.namespaces[pod.Namespace]; !ok || !nsSel.Matches(nsLabels) {
			return false
		}
		return podSel.Matches(labels.Set(pod.Labels))
	}, nil
}

func podPrefixes(pods []podEntry) []netip.Prefix {
	var out []netip.Prefix
	for _, e := range pods {
		for _, ip := range e.ips {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	return out
}

func hasNamedPort(ports []networkingv1.NetworkPolicyPort) bool {
	return slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool {
		return p.Port != nil && p.Port.StrVal != "" && p.Port.IntVal == 0
	})
}

// resolvePorts compiles a rule's ports: nil for none given (every port);
// named ports resolve against pod (none without one).
func resolvePorts(ports []networkingv1.NetworkPolicyPort, pod *corev1.Pod) []Port {
	if len(ports) == 0 {
		return nil
	}
	out := []Port{}
	for _, p := range ports {
		proto := protocol(p)
		switch {
		case p.Port == nil:
			out = append(out, Port{Protocol: proto})
		case p.Port.StrVal != "" && p.Port.IntVal == 0:
			if pod != nil {
				out = append(out, namedPorts([]networkingv1.NetworkPolicyPort{p}, pod)...)
			}
		default:
			port := Port{Protocol: proto, Port: p.Port.IntVal}
			if p.EndPort != nil {
				port.EndPort = *p.EndPort
			}
			out = append(out, port)
		}
	}
	return out
}

// namedPorts resolves the named ports of ports against pod's containers.
func namedPorts(ports []networkingv1.NetworkPolicyPort, pod *corev1.Pod) []Port {
	var out []Port
	for _, p := range ports {
		if p.Port == nil || p.Port.StrVal == "" || p.Port.IntVal != 0 {
			continue
		}
		proto := protocol(p)
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				cpProto := cp.Protocol
				if cpProto == "" {
					cpProto = corev1.ProtocolTCP
				}
				if cp.Name == p.Port.StrVal && cpProto == proto {
					out = append(out, Port{Protocol: proto, Port: cp.ContainerPort})
				}
			}
		}
	}
	return out
}

func protocol(p networkingv1.NetworkPolicyPort) corev1.Protocol {
	if p.Protocol == nil {
		return corev1.ProtocolTCP
	}
	return *p.Protocol
}

// ipBlock is a CIDR less its excepts, as disjoint prefixes. An IPv4 CIDR
// is none: no IPv6 packet is in it, and an IPv4 element in the node's
// IPv6 sets would fail the whole node's rules.
func ipBlock(b *networkingv1.IPBlock) ([]netip.Prefix, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return nil, fmt.Errorf("ipBlock cidr %q: %w", b.CIDR, err)
	}
	if !cidr.Addr().Is6() || cidr.Addr().Is4In6() {
		return nil, nil
	}
	out := []netip.Prefix{cidr.Masked()}
	for _, e := range b.Except {
		except, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("ipBlock except %q: %w", e, err)
		}
		var next []netip.Prefix
		for _, p := range out {
			next = append(next, subtract(p, except.Masked())...)
		}
		out = next
	}
	return out, nil
}

// subtract is p less e, as disjoint prefixes: p's halves, recursively,
// down to those clear of e (at most one prefix per bit between them).
func subtract(p, e netip.Prefix) []netip.Prefix {
	if p.Addr().BitLen() != e.Addr().BitLen() || !p.Overlaps(e) {
		return []netip.Prefix{p}
	}
	if e.Bits() <= p.Bits() {
		return nil // e covers p
	}
	low, high := halves(p)
	return append(subtract(low, e), subtract(high, e)...)
}

// halves splits p into its two prefixes one bit longer.
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	low := netip.PrefixFrom(p.Addr(), bits).Masked()
	b := low.Addr().AsSlice()
	b[(bits-1)/8] |= 0x80 >> ((bits - 1) % 8)
	high, _ := netip.AddrFromSlice(b)
	return low, netip.PrefixFrom(high, bits)
}
