package podnet

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/constants"
)

func testNode(name, cidr, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: []string{cidr}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// joined is a Node as the API server stores it: with a UID and a creation
// time (the fake client sets neither), created age seconds after epoch.
func joined(n *corev1.Node, age int64) *corev1.Node {
	n.UID = types.UID("uid-" + n.Name)
	n.CreationTimestamp = metav1.Unix(age, 0)
	return n
}

// publisherUnderTest runs PublishRoutes on client with testRules and the
// test servers until the test ends.
func publisherUnderTest(t *testing.T, client *fake.Clientset) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rules := testRules
	rules.Servers = func(context.Context) (map[string][]netip.Addr, error) { return testServers, nil }
	go PublishRoutes(ctx, client, rules, constants.PodRouteEventsPerSecond)
}

func routeIn(client *fake.Clientset, name string) map[string]string {
	cm, err := client.CoreV1().ConfigMaps(RoutesNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cm.Data
}

// refusals lists the Events the publisher raised, as "node: message".
func refusals(client *fake.Clientset) []string {
	events, _ := client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	var out []string
	for _, e := range events.Items {
		if e.Reason == ReasonRouteRefused && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "Node" {
			out = append(out, e.InvolvedObject.Name+": "+e.Message)
		}
	}
	slices.Sort(out)
	return out
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 5 s", what)
		}
	}
}

// The publisher writes a node's route when it joins, never for a status
// report, keeps it through the address the node first had when its status
// later claims another (raising an Event), deletes it with the Node, and
// deletes a route no Node has.
func TestPublishRoutes(t *testing.T) {
	ctx := context.Background()
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: "gone", Labels: map[string]string{RouteLabel: "true"}}, Data: map[string]string{routeVia: "fddf::9"}}
	// What kube-controller-manager puts in every namespace: not a route.
	rootCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "..."}}
	client := fake.NewSimpleClientset(joined(testNode("n1", "fddf:4035:b500:1::/64", "fddf:4035:b520::11"), 1), orphan, rootCA)
	publisherUnderTest(t, client)
	want := map[string]string{routePodCIDRs: "fddf:4035:b500:1::/64", routeVia: "fddf:4035:b520::11", routeNodeUID: "uid-n1"}
	eventually(t, "n1's route published", func() bool { return reflect.DeepEqual(routeIn(client, "n1"), want) })
	eventually(t, "the orphan route deleted", func() bool { return routeIn(client, "gone") == nil })
	if routeIn(client, "kube-root-ca.crt") == nil {
		t.Error("the publisher deleted kube-root-ca.crt, which is not a route")
	}
	if cm, _ := client.CoreV1().ConfigMaps(RoutesNamespace).Get(ctx, "n1", metav1.GetOptions{}); cm.Labels[RouteLabel] != "true" {
		t.Errorf("n1's route has labels %v, want %s", cm.Labels, RouteLabel)
	}

	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "create" || a.GetVerb() == "update" || a.GetVerb() == "delete") {
				n++
			}
		}
		return n
	}
	before := writes()
	n1, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n1.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	client.CoreV1().Nodes().UpdateStatus(ctx, n1, metav1.UpdateOptions{})
	time.Sleep(300 * time.Millisecond)
	if got := writes(); got != before {
		t.Errorf("a status report made %d route writes, want none", got-before)
	}
	n1, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n1.Status.Addresses[0].Address = "fddf:4035:b520::21"
	client.CoreV1().Nodes().UpdateStatus(ctx, n1, metav1.UpdateOptions{})
	moved := []string{"n1: status.addresses[InternalIP] of node n1 is not routed: fddf:4035:b520::21 differs from fddf:4035:b520::11, the address node n1 was first routed through: its route stays via fddf:4035:b520::11 (delete the Node of a node that really moved; it registers again)"}
	eventually(t, "the move refused with an Event", func() bool { return slices.Equal(refusals(client), moved) })
	if got := routeIn(client, "n1"); !reflect.DeepEqual(got, want) {
		t.Errorf("n1's route after its status claimed another address: %v, want %v", got, want)
	}
	client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{})
	eventually(t, "n1's route deleted with the Node", func() bool { return routeIn(client, "n1") == nil })
}

// A node joined with a join token writes its own Node: its pod range at
// creation (where the API server lets it) and its status addresses. None
// of what it claims of another node, a server or outside its allocation
// becomes a route: the route ConfigMap is not written, the others' are
// unchanged, and an Event on the Node says what was refused and why.
func TestPublishRefusesInjectedRoutes(t *testing.T) {
	n1 := joined(testNode("k1m-node-1", "fddf:4035:b500:1::/64", "fddf:4035:b520::11"), 1)
	n2 := joined(testNode("k1m-node-2", "fddf:4035:b500:2::/64", "fddf:4035:b520::12"), 2)
	for _, c := range []struct {
		name, cidr, ip, want string
	}{
		{"another node's address as a range", "fddf:4035:b520::12/128", "fddf:4035:b520::66",
			"spec.podCIDRs of node evil is not routed: fddf:4035:b520::12/128 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"a server's address as a range", "fddf:4035:b520::1/128", "fddf:4035:b520::66",
			"spec.podCIDRs of node evil is not routed: fddf:4035:b520::1/128 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"a /65 of another node's range", "fddf:4035:b500:2::/65", "fddf:4035:b520::66",
			"spec.podCIDRs of node evil is not routed: fddf:4035:b500:2::/65 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"everything", "::/0", "fddf:4035:b520::66",
			"spec.podCIDRs of node evil is not routed: ::/0 is not a /64 node range inside the cluster range fddf:4035:b500::/48: only kube-controller-manager's node IPAM allocation is routed"},
		{"another node's range", "fddf:4035:b500:2::/64", "fddf:4035:b520::66",
			"spec.podCIDRs of node evil is not routed: fddf:4035:b500:2::/64 is node k1m-node-2's pod range, which it had first: node evil claims another node's range"},
		{"via another node", "fddf:4035:b500:9::/64", "fddf:4035:b520::11",
			"status.addresses[InternalIP] of node evil is not routed: fddf:4035:b520::11 is node k1m-node-1's address, which it had first: node evil's status claims another node's address"},
		{"via a server", "fddf:4035:b500:9::/64", "fddf:4035:b520::1",
			"status.addresses[InternalIP] of node evil is not routed: fddf:4035:b520::1 is the address of server server-1: only that server's own node is routed through it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(n1.DeepCopy(), n2.DeepCopy())
			publisherUnderTest(t, client)
			eventually(t, "the two nodes' routes", func() bool { return routeIn(client, "k1m-node-2") != nil && routeIn(client, "k1m-node-1") != nil })
			before := map[string]map[string]string{"k1m-node-1": routeIn(client, "k1m-node-1"), "k1m-node-2": routeIn(client, "k1m-node-2")}
			evil := joined(testNode("evil", c.cidr, c.ip), 3)
			if _, err := client.CoreV1().Nodes().Create(context.Background(), evil, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the refusal's Event", func() bool { return slices.Equal(refusals(client), []string{"evil: " + c.want}) })
			if got := routeIn(client, "evil"); got != nil {
				t.Errorf("evil's route was published: %v", got)
			}
			for name, data := range before {
				if got := routeIn(client, name); !reflect.DeepEqual(got, data) {
					t.Errorf("%s's route became %v, was %v", name, got, data)
				}
			}
		})
	}
}

// A route published by a release that bound no Node is checked again and
// bound; one it should never have published goes.
func TestPublishChecksRoutesOfEarlierReleases(t *testing.T) {
	old := func(name, cidr, via string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: name, Labels: map[string]string{RouteLabel: "true"}},
			Data: map[string]string{routePodCIDRs: cidr, routeVia: via}}
	}
	client := fake.NewSimpleClientset(
		joined(testNode("k1m-node-1", "fddf:4035:b500:1::/64", "fddf:4035:b520::11"), 1),
		joined(testNode("evil", "fddf:4035:b520::12/128", "fddf:4035:b520::11"), 2),
		old("k1m-node-1", "fddf:4035:b500:1::/64", "fddf:4035:b520::11"),
		old("evil", "fddf:4035:b520::12/128", "fddf:4035:b520::11"))
	publisherUnderTest(t, client)
	want := map[string]string{routePodCIDRs: "fddf:4035:b500:1::/64", routeVia: "fddf:4035:b520::11", routeNodeUID: "uid-k1m-node-1"}
	eventually(t, "k1m-node-1's route bound to its Node", func() bool { return reflect.DeepEqual(routeIn(client, "k1m-node-1"), want) })
	eventually(t, "evil's route deleted", func() bool { return routeIn(client, "evil") == nil })
}

func TestRouteOf(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{routePodCIDRs: "fddf:4035:b500:2::/64,10.0.0.0/24", routeVia: "fddf:4035:b520::12"}}
	got := routeOf(cm)
	_, dst, _ := net.ParseCIDR("fddf:4035:b500:2::/64")
	if len(got) != 1 || got[0].dst.String() != dst.String() || !got[0].via.Equal(net.ParseIP("fddf:4035:b520::12")) {
		t.Errorf("routeOf = %v, want one route to %s (IPv4 ignored)", got, dst)
	}
	if got := routeOf(&corev1.ConfigMap{Data: map[string]string{routePodCIDRs: "fddf:4035:b500:2::/64", routeVia: "10.0.0.1"}}); got != nil {
		t.Errorf("an IPv4 next hop: %v, want none", got)
	}
}
