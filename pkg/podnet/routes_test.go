package podnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"k1m.dev/k1m/pkg/testutil"
)

func kroute(dst, via string, protocol int) kernelRoute {
	_, d, _ := net.ParseCIDR(dst)
	return kernelRoute{podRoute{dst: d, via: net.ParseIP(via)}, protocol}
}

func publishedRoute(name, cidr, via string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: name, Labels: map[string]string{RouteLabel: "true"}},
		Data: map[string]string{routePodCIDRs: cidr, routeVia: via, routeNodeUID: "uid-" + name}}
}

// At start a node removes every route of its making that no published node
// owns (marked with RouteProtocol; an unmarked gateway route into the
// cluster range; an unmarked host route to a node's address, as earlier
// releases installed an injected one), keeps the routes of others (the
// default route, an operator's route, even via a node), and installs the
// published ones. A route ConfigMap deleted takes its route off at once.
func TestNodeReconcilesItsRoutes(t *testing.T) {
	kernel := &fakeKernel{table: []kernelRoute{
		kroute("fddf:4035:b500:2::/64", "fddf:4035:b520::12", RouteProtocol),     // published: kept
		kroute("fddf:4035:b500:7::/64", "fddf:4035:b520::17", RouteProtocol),     // its node is gone
		kroute("fddf:4035:b500:8::/64", "fddf:4035:b520::18", unix.RTPROT_BOOT),  // an earlier release's, node gone
		kroute("fddf:4035:b520::12/128", "fddf:4035:b520::13", unix.RTPROT_BOOT), // injected under an earlier release
		kroute("::/0", "fddf:4035:b520::fe", unix.RTPROT_BOOT),                   // the default route
		kroute("fd00:1::/64", "fddf:4035:b520::fe", unix.RTPROT_STATIC),          // an operator's
		kroute("fd00:3::/64", "fddf:4035:b520::12", unix.RTPROT_BOOT),            // an operator's, via a node
	}}
	client := fake.NewSimpleClientset(testNode("n1", "fddf:4035:b500:1::/64", "fddf:4035:b520::11"),
		publishedRoute("n2", "fddf:4035:b500:2::/64", "fddf:4035:b520::12"),
		publishedRoute("n3", "fddf:4035:b500:3::/64", "fddf:4035:b520::13"),
		publishedRoute("outside", "fd00:2::/64", "fddf:4035:b520::14"))
	dir := t.TempDir()
	nw := Network{Self: "n1", ConfDir: dir, IPAMDir: dir + "/ipam", Routes: RoutesPublished, kernel: kernel,
		ClusterCIDR: netip.MustParsePrefix("fddf:4035:b500::/48")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nw.Run(ctx, client)
	want := []string{
		"::/0 via fddf:4035:b520::fe proto 3",
		"fd00:1::/64 via fddf:4035:b520::fe proto 4",
		"fd00:3::/64 via fddf:4035:b520::12 proto 3",
		"fddf:4035:b500:2::/64 via fddf:4035:b520::12 proto 75",
		"fddf:4035:b500:3::/64 via fddf:4035:b520::13 proto 75",
	}
	testutil.Eventually(t, 5*time.Second, "the node's routes reconciled", func() error {
		if got := kernel.routes(); !slices.Equal(got, want) {
			return fmt.Errorf("routes %q, want %q", got, want)
		}
		return nil
	})
	if err := client.CoreV1().ConfigMaps(RoutesNamespace).Delete(ctx, "n3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(r string) bool { return r == "fddf:4035:b500:3::/64 via fddf:4035:b520::13 proto 75" })
	testutil.Eventually(t, 5*time.Second, "n3's route removed with its ConfigMap", func() error {
		if got := kernel.routes(); !slices.Equal(got, want) {
			return fmt.Errorf("routes %q, want %q", got, want)
		}
		return nil
	})
	if got := kernel.replaced(); slices.Contains(got, "fd00:2::/64 via fddf:4035:b520::14") {
		t.Errorf("a published route outside the cluster range was installed: %q", got)
	}
}

// A published route the kernel lost (removed by hand) is put back at the
// next reconcile, although the node's table says it installed it.
func TestReconcilePutsBackALostRoute(t *testing.T) {
	kernel := &fakeKernel{}
	nw := Network{Self: "n1", kernel: kernel, ClusterCIDR: netip.MustParsePrefix("fddf:4035:b500::/48")}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	store.Add(publishedRoute("n2", "fddf:4035:b500:2::/64", "fddf:4035:b520::12"))
	applied := newRouteTable()
	nw.reconcile(store, applied)
	lost := kroute("fddf:4035:b500:2::/64", "fddf:4035:b520::12", RouteProtocol)
	if err := kernel.remove(lost.podRoute); err != nil {
		t.Fatal(err)
	}
	nw.reconcile(store, applied)
	if got, want := kernel.routes(), []string{"fddf:4035:b500:2::/64 via fddf:4035:b520::12 proto 75"}; !slices.Equal(got, want) {
		t.Errorf("routes %q, want %q", got, want)
	}
}

// On kind (routes from the Nodes), a Node deleted takes its route off.
func TestRoutesFromNodesFollowDeletion(t *testing.T) {
	kernel := &fakeKernel{}
	client := fake.NewSimpleClientset(testNode("n1", "fddf:4035:b500:1::/64", "fddf:4035:b520::11"), testNode("n2", "fddf:4035:b500:2::/64", "fddf:4035:b520::12"))
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Network{Self: "n1", ConfDir: dir, IPAMDir: dir + "/ipam", Routes: RoutesFromNodes, kernel: kernel}.Run(ctx, client)
	want := []string{"fddf:4035:b500:2::/64 via fddf:4035:b520::12 proto 75"}
	testutil.Eventually(t, 5*time.Second, "n2's route", func() error {
		if got := kernel.routes(); !slices.Equal(got, want) {
			return fmt.Errorf("routes %q, want %q", got, want)
		}
		return nil
	})
	if err := client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "n2's route removed with its Node", func() error {
		if got := kernel.routes(); len(got) != 0 {
			return fmt.Errorf("routes %q, want none", got)
		}
		return nil
	})
}
