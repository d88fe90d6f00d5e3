package netpol

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pod(ns, name, node, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func policy(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func prefixes(s ...string) []netip.Prefix {
	out := []netip.Prefix{}
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

var (
	web    = map[string]string{"app": "web"}
	client = map[string]string{"app": "client"}
	tcp    = corev1.ProtocolTCP
	udp    = corev1.ProtocolUDP
)

// The cluster every case starts from: two namespaces, web pods on two
// nodes, clients in both namespaces, a host-network pod.
func base() Cluster {
	hostNet := pod("prod", "agent", "n1", "fddf::1", web)
	hostNet.Spec.HostNetwork = true
	return Cluster{
		Namespaces: []*corev1.Namespace{namespace("prod", map[string]string{"team": "a"}), namespace("dev", map[string]string{"team": "b"})},
		Pods: []*corev1.Pod{
			pod("prod", "web-1", "n1", "fddf:1::10", web, corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
			pod("prod", "web-2", "n2", "fddf:2::10", web, corev1.ContainerPort{Name: "http", ContainerPort: 8081}),
			pod("prod", "client", "n2", "fddf:2::20", client),
			pod("dev", "client", "n3", "fddf:3::20", client),
			hostNet,
		},
	}
}

func TestNoPolicyNoRules(t *testing.T) {
	got, err := Compile(base())
	if err != nil || len(got) != 0 {
		t.Fatalf("Compile = %v, %v; want nothing", got, err)
	}
}

func TestDenyAllIngressIsolatesEveryPodOfItsNamespace(t *testing.T) {
	c := base()
	c.Policies = []*networkingv1.NetworkPolicy{policy("prod", "deny", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}})}
	got, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]PodRules{
		"n1": {{Namespace: "prod", Name: "web-1", IPs: addrs("fddf:1::10"), IngressIsolated: true}},
		"n2": {{Namespace: "prod", Name: "client", IPs: addrs("fddf:2::20"), IngressIsolated: true},
			{Namespace: "prod", Name: "web-2", IPs: addrs("fddf:2::10"), IngressIsolated: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Compile:\n got %+v\nwant %+v", got, want)
	}
}

func TestAllowFromNamespaceAndPodsOnANamedPort(t *testing.T) {
	c := base()
	http := intstr.FromString("http")
	c.Policies = []*networkingv1.NetworkPolicy{policy("prod", "web", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: web},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}, PodSelector: &metav1.LabelSelector{MatchLabels: client}},
				{PodSelector: &metav1.LabelSelector{MatchLabels: client}}, // the policy's namespace
			},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &http}},
		}},
	})}
	got, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	peers := prefixes("fddf:2::20/128", "fddf:3::20/128")
	want := map[string][]PodRules{
		"n1": {{Namespace: "prod", Name: "web-1", IPs: addrs("fddf:1::10"), IngressIsolated: true,
			Ingress: []Rule{{Peers: peers, Ports: []Port{{Protocol: tcp, Port: 8080}}}}}},
		"n2": {{Namespace: "prod", Name: "web-2", IPs: addrs("fddf:2::10"), IngressIsolated: true,
			Ingress: []Rule{{Peers: peers, Ports: []Port{{Protocol: tcp, Port: 8081}}}}}},
	}
	// Peers come in pod order; compare as sets.
	for _, rules := range got {
		for _, r := range rules {
			for i := range r.Ingress {
				sortPrefixes(r.Ingress[i].Peers)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Compile:\n got %+v\nwant %+v", got, want)
	}
}

func TestEgressToAnIPBlockAndNamedPortsOfPeers(t *testing.T) {
	c := base()
	http, dns := intstr.FromString("http"), intstr.FromInt32(53)
	c.Policies = []*networkingv1.NetworkPolicy{policy("dev", "out", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: client},
		Egress: []networkingv1.NetworkPolicyEgressRule{
			{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "fddf:5::/64", Except: []string{"fddf:5::/65"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}}},
			{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: web}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}},
		},
	})}
	got, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]PodRules{
		"n3": {{Namespace: "dev", Name: "client", IPs: addrs("fddf:3::20"), EgressIsolated: true, IngressIsolated: true,
			Egress: []Rule{
				{Peers: prefixes("fddf:5:0:0:8000::/65"), Ports: []Port{{Protocol: udp, Port: 53}}},
				{Peers: prefixes("fddf:1::10/128"), Ports: []Port{{Protocol: tcp, Port: 8080}}},
				{Peers: prefixes("fddf:2::10/128"), Ports: []Port{{Protocol: tcp, Port: 8081}}},
			}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Compile:\n got %+v\nwant %+v", got, want)
	}
}

func TestSubtract(t *testing.T) {
	for _, c := range []struct {
		p, e string
		want []netip.Prefix
	}{
		{"fddf::/64", "fddf::/64", nil},
		{"fddf::/64", "fddf::/48", nil},
		{"fddf::/64", "fddf:1::/64", prefixes("fddf::/64")},
		{"fddf::/62", "fddf:0:0:1::/64", prefixes("fddf::/64", "fddf:0:0:2::/63")},
	} {
		if got := subtract(netip.MustParsePrefix(c.p), netip.MustParsePrefix(c.e)); !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s less %s = %v, want %v", c.p, c.e, got, c.want)
		}
	}
}

func sortPrefixes(p []netip.Prefix) {
	for i := range p {
		for j := i + 1; j < len(p); j++ {
			if p[j].Addr().Less(p[i].Addr()) {
				p[i], p[j] = p[j], p[i]
			}
		}
	}
}

// An IPv4 ipBlock selects nothing in an IPv6-only cluster: its rule
// allows no peer, and the node's rules hold no IPv4 element (which would
// fail its IPv6 sets, and with them every policy of the node).
func TestIPv4BlockSelectsNothing(t *testing.T) {
	c := base()
	c.Policies = []*networkingv1.NetworkPolicy{policy("dev", "v4", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: client},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "fddf:5::/64"}},
		}}},
	})}
	got, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]PodRules{
		"n3": {{Namespace: "dev", Name: "client", IPs: addrs("fddf:3::20"), EgressIsolated: true,
			Egress: []Rule{{Peers: prefixes("fddf:5::/64")}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Compile:\n got %+v\nwant %+v", got, want)
	}
}
