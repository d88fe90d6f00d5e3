package clusterload

import (
	"context"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/netpol"
)

func TestIsolatingPolicy(t *testing.T) {
	port := intstr.FromInt32(8080)
	want := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "k1m-bench-isolate", Namespace: "ns", Labels: map[string]string{"k1m.dev/bench": "cluster"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "app-0000"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"k1m.dev/bench-client": "yes"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		},
	}
	if got := IsolatingPolicy("ns", DeploymentName(0)); !reflect.DeepEqual(got, want) {
		t.Errorf("IsolatingPolicy =\n%+v\nwant\n%+v", got, want)
	}
}

func probePod(name, node, ip string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: ip}}}}
}

// publish writes node's rules as the publisher does.
func publish(t *testing.T, client *fake.Clientset, node string, rules []netpol.PodRules) {
	t.Helper()
	data, err := netpol.Encode(rules)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: netpol.Namespace, Name: node}, Data: map[string]string{netpol.RulesKey: string(data)}}
	if _, err := client.CoreV1().ConfigMaps(netpol.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitRulesWantsEverySelectedPodIsolatedWithThePeers(t *testing.T) {
	selected := []corev1.Pod{probePod("web-1", "node-1", "fd00:20::1"), probePod("web-2", "node-2", "fd00:20::2")}
	client := fake.NewClientset()
	ctx := context.Background()
	client1 := netip.MustParsePrefix("fd00:20::9/128")
	if err := waitRules(ctx, client, selected, nil, 0); err == nil ||
		err.Error() != "the rules of the nodes of 2 isolated pods naming 0 peers: timed out after 0s: no rules published yet" {
		t.Errorf("no rules: %v", err)
	}
	isolated := func(name, ip string, peers ...netip.Prefix) netpol.PodRules {
		return netpol.PodRules{Namespace: "ns", Name: name, IPs: []netip.Addr{netip.MustParseAddr(ip)}, IngressIsolated: true,
			Ingress: []netpol.Rule{{Peers: append([]netip.Prefix{}, peers...), Ports: []netpol.Port{{Protocol: "TCP", Port: 8080}}}}}
	}
	publish(t, client, "node-1", []netpol.PodRules{isolated("web-1", "fd00:20::1", client1)})
	publish(t, client, "node-2", []netpol.PodRules{isolated("web-2", "fd00:20::2")})
	if err := waitRules(ctx, client, selected, []netip.Prefix{client1}, 0); err == nil ||
		err.Error() != "the rules of the nodes of 2 isolated pods naming 1 peers: timed out after 0s: node node-2: pod web-2: peers [], want [fd00:20::9/128]" {
		t.Errorf("node-2 behind: %v", err)
	}
	if err := waitRules(ctx, client, selected[:1], []netip.Prefix{client1}, 0); err != nil {
		t.Errorf("node-1's rules current: %v", err)
	}
}

func TestNetpolColumns(t *testing.T) {
	for _, c := range []struct {
		probe *NetpolProbe
		want  []string
	}{
		{nil, []string{"", "", "", "", "", ""}},
		{&NetpolProbe{Watches: 1000, Error: "not run"}, []string{"1000", "", "", "", "", "not run"}},
		{&NetpolProbe{Watches: 1000, Selected: 10, RuleNodes: 10, PeerEvents: 50, UnreadEvents: 10}, []string{"1000", "10", "10", "10", "10", ""}},
	} {
		if got := netpolColumns(c.probe); !reflect.DeepEqual(got, c.want) {
			t.Errorf("netpolColumns(%+v) = %q, want %q", c.probe, got, c.want)
		}
	}
}
