package podnet

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func testNode(name, cidr, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: []string{cidr}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// The publisher writes a node's route when it joins and when its address
// or range changes, never for a status report, deletes it with the Node,
// and deletes a route no Node has.
func TestPublishRoutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: "gone", Labels: map[string]string{RouteLabel: "true"}}, Data: map[string]string{routeVia: "fddf::9"}}
	// What kube-controller-manager puts in every namespace: not a route.
	rootCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "..."}}
	client := fake.NewSimpleClientset(testNode("n1", "fddf:4035:b500:1::/64", "fddf:4035:b520::11"), orphan, rootCA)
	go PublishRoutes(ctx, client)
	route := func(name string) map[string]string {
		cm, err := client.CoreV1().ConfigMaps(RoutesNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return cm.Data
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 5 s", what)
			}
		}
	}
	want := map[string]string{routePodCIDRs: "fddf:4035:b500:1::/64", routeVia: "fddf:4035:b520::11"}
	eventually("n1's route published", func() bool { return reflect.DeepEqual(route("n1"), want) })
	eventually("the orphan route deleted", func() bool { return route("gone") == nil })
	if route("kube-root-ca.crt") == nil {
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
	eventually("n1's route moved", func() bool { return route("n1")[routeVia] == "fddf:4035:b520::21" })
	client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{})
	eventually("n1's route deleted with the Node", func() bool { return route("n1") == nil })
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
