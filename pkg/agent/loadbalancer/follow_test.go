package loadbalancer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/pkg/testutil"
)

// apiSlice is an EndpointSlice as kube-apiserver keeps it for the
// kubernetes Service (k8s.io/kubernetes pkg/controlplane/reconcilers:
// named after the Service, labelled with it, port "https").
func apiSlice(name string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func TestAddresses(t *testing.T) {
	notReady := apiSlice("kubernetes", 6443, "fddf:4035:b520::3")
	notReady.Endpoints[0].Conditions.Ready = ptr.To(false)
	noCondition := apiSlice("kubernetes-extra", 6443, "fddf:4035:b520::4")
	noCondition.Endpoints[0].Conditions = discoveryv1.EndpointConditions{}
	other := apiSlice("web", 443, "fddf:4035:b520::9")
	other.Labels[discoveryv1.LabelServiceName] = "web"
	otherNamespace := apiSlice("kubernetes", 6443, "fddf:4035:b520::8")
	otherNamespace.Namespace = "kube-system"
	unnamedPort := apiSlice("unnamed", 7443, "fddf:4035:b520::5")
	unnamedPort.Ports[0].Name = nil
	twoPortsNoHTTPS := apiSlice("two", 6443, "fddf:4035:b520::6")
	twoPortsNoHTTPS.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("a"), Port: ptr.To[int32](1)}, {Name: ptr.To("b"), Port: ptr.To[int32](2)}}
	got := Addresses([]*discoveryv1.EndpointSlice{
		apiSlice("kubernetes", 6443, "fddf:4035:b520::2", "fddf:4035:b520::1", "fddf:4035:b520::2"),
		notReady, noCondition, other, otherNamespace, unnamedPort, twoPortsNoHTTPS,
	})
	want := []string{"[fddf:4035:b520::1]:6443", "[fddf:4035:b520::2]:6443", "[fddf:4035:b520::4]:6443", "[fddf:4035:b520::5]:7443"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// Follow replaces --server alone with the kubernetes endpoints, adds the
// servers that join and saves the list; servers that leave the endpoints
// stay.
func TestFollowGrowsTheListFromTheEndpointSlices(t *testing.T) {
	servers, addrs, order := threeServers(t, "node-5")
	stateFile := filepath.Join(t.TempDir(), "loadbalancer.json")
	lb, _ := start(t, Config{Server: "https://" + servers["a"].addr, NodeName: "node-5", StateFile: stateFile})
	hostPort := func(s *fakeServer) (string, int32) {
		// The fake servers share [::1] and differ by port: one slice
		// per server (the API allows several slices per Service).
		var port int32
		fmt.Sscanf(s.addr[len("[::1]:"):], "%d", &port)
		return "::1", port
	}
	var slices []*discoveryv1.EndpointSlice
	for i, n := range []string{"a", "b"} {
		host, port := hostPort(servers[n])
		slices = append(slices, apiSlice(fmt.Sprintf("kubernetes-%d", i), port, host))
	}
	client := fake.NewClientset(slices[0], slices[1])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lb.Follow(ctx, client)
	twoServers := sorted([]string{servers["a"].addr, servers["b"].addr})
	testutil.Eventually(t, 5*time.Second, "list from the slices", func() error {
		if got := lb.Servers(); !reflect.DeepEqual(got, twoServers) {
			return fmt.Errorf("list %v, want %v", got, twoServers)
		}
		return nil
	})
	// Saved as it changed.
	testutil.Eventually(t, 5*time.Second, "saved list", func() error {
		if got, err := readState(stateFile); !reflect.DeepEqual(got, twoServers) || err != nil {
			return fmt.Errorf("saved %v (%v), want %v", got, err, twoServers)
		}
		return nil
	})
	host, port := hostPort(servers["c"])
	third := apiSlice("kubernetes-2", port, host)
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, third, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "list after a server joined", func() error {
		if got := lb.Servers(); !reflect.DeepEqual(got, sorted(addrs)) {
			return fmt.Errorf("list %v, want %v", got, sorted(addrs))
		}
		return nil
	})
	if got, _, _ := connect(t, lb); got != order[0] {
		t.Errorf("went to %s, want %s", got, order[0])
	}
	// c leaves the endpoints, then a, then b (every server missing from
	// the endpoints for a moment): the list keeps all three, as saved.
	all := fmt.Sprintf("{\"servers\":[%q,%q,%q]}\n", sorted(addrs)[0], sorted(addrs)[1], sorted(addrs)[2])
	if err := client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "kubernetes-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range slices {
		s.Endpoints = nil
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if got := lb.Servers(); !reflect.DeepEqual(got, sorted(addrs)) {
		t.Errorf("list after the endpoints emptied: %v, want every server seen %v", got, sorted(addrs))
	}
	if data, _ := os.ReadFile(stateFile); string(data) != all {
		t.Errorf("saved %q after the endpoints emptied, want %q", data, all)
	}
}
