package podnet

import (
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestCNIConfigUsesTheNodeRange(t *testing.T) {
	raw, err := cniConfig("fddf:4035:b500:3::/64", "/d/ipam")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Ranges [][]struct{ Subnet string } `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		t.Fatal(err)
	}
	if conf.Plugins[0].Type != "bridge" || conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "fddf:4035:b500:3::/64" {
		t.Fatalf("unexpected CNI config: %s", raw)
	}
}

func TestPodRoutesGoThroughEachOtherNode(t *testing.T) {
	node := func(name, ip string, cidrs ...string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	}
	routes := podRoutes([]*corev1.Node{
		node("self", "fddf:4035:b520::1", "fddf:4035:b500::/64"),
		node("b", "fddf:4035:b520::12", "fddf:4035:b500:2::/64"),
		node("a", "fddf:4035:b520::11", "fddf:4035:b500:1::/64"),
		node("v4", "10.0.0.1", "fddf:4035:b500:4::/64"),
		node("no-range", "fddf:4035:b520::13"),
	}, "self")
	if len(routes) != 2 {
		t.Fatalf("routes %v, want two (not to self, not via IPv4, not without a range)", routes)
	}
	if routes[0].dst.String() != "fddf:4035:b500:1::/64" || routes[0].via.String() != "fddf:4035:b520::11" {
		t.Errorf("first route %v via %v", routes[0].dst, routes[0].via)
	}
}

func TestOptionsNameTheBadFlag(t *testing.T) {
	good := Options{NodeName: "n1", ConfDir: "/etc/cni/net.d", IPAMDir: "/var/lib/cni/k1m", APIEndpoint: "[fc00::2]:6443"}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for want, mutate := range map[string]func(*Options){
		"--node-name":    func(o *Options) { o.NodeName = "" },
		"--cni-conf-dir": func(o *Options) { o.ConfDir = "net.d" },
		"--ipam-dir":     func(o *Options) { o.IPAMDir = "ipam" },
		"--api-endpoint": func(o *Options) { o.APIEndpoint = "fc00::2" },
	} {
		o := good
		mutate(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming the flag", want, err)
		}
	}
}

// A status heartbeat changes nothing routes are made of, so it is not
// handled; a new pod range or address is, and so is anything that is not a
// Node (a tombstone), to be safe.
func TestRoutingChangedOnlyForRangesAndAddresses(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"fddf:4035:b500:1::/64"}},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fddf:4035:b520::11"}, {Type: corev1.NodeHostName, Address: "a"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}}
	heartbeat := node.DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	heartbeat.ResourceVersion = "8"
	newRange := node.DeepCopy()
	newRange.Spec.PodCIDRs = []string{"fddf:4035:b500:2::/64"}
	newAddress := node.DeepCopy()
	newAddress.Status.Addresses[0].Address = "fddf:4035:b520::12"
	newHostname := node.DeepCopy()
	newHostname.Status.Addresses[1].Address = "b"
	cases := []struct {
		name         string
		old, updated any
		want         bool
	}{
		{"a heartbeat", node, heartbeat, false},
		{"another hostname address", node, newHostname, false},
		{"a new pod range", node, newRange, true},
		{"a new InternalIP", node, newAddress, true},
		{"a range assigned", &corev1.Node{}, node, true},
		{"not a Node", cache.DeletedFinalStateUnknown{Key: "a"}, node, true},
	}
	for _, c := range cases {
		if got := routingChanged(c.old, c.updated); got != c.want {
			t.Errorf("%s: routingChanged = %v, want %v", c.name, got, c.want)
		}
	}
	if !resynced(node, node.DeepCopy()) || resynced(node, heartbeat) {
		t.Error("resynced: want true for the same resourceVersion (the informer's resync), false for a heartbeat")
	}
}

// Each sync installs only the routes that are new or moved: a node joining
// a cluster of N costs one route replace, not N.
func TestRouteTableGivesOnlyNewOrMovedRoutes(t *testing.T) {
	route := func(dst, via string) podRoute {
		_, d, _ := net.ParseCIDR(dst)
		return podRoute{dst: d, via: net.ParseIP(via)}
	}
	a, b := route("fddf:4035:b500:1::/64", "fddf:4035:b520::11"), route("fddf:4035:b500:2::/64", "fddf:4035:b520::12")
	table := newRouteTable()
	steps := []struct {
		want, changed []podRoute
	}{
		{[]podRoute{a}, []podRoute{a}},
		{[]podRoute{a, b}, []podRoute{b}},
		{[]podRoute{a, b}, nil},
		{[]podRoute{route("fddf:4035:b500:1::/64", "fddf:4035:b520::13"), b}, []podRoute{route("fddf:4035:b500:1::/64", "fddf:4035:b520::13")}},
	}
	for i, s := range steps {
		if got := table.changed(s.want); !reflect.DeepEqual(got, s.changed) {
			t.Errorf("step %d: changed = %v, want %v", i+1, got, s.changed)
		}
	}
}

// A route whose install fails is retried at every change of its node,
// and logged only when its error is new: each status report of a node
// is a change.
func TestRouteTableReportsOnlyANewFailure(t *testing.T) {
	table := newRouteTable()
	_, dst, _ := net.ParseCIDR("fddf:4035:b500:2::/64")
	route := podRoute{dst: dst, via: net.ParseIP("fd00:10::2")}
	unreachable, gone := errors.New("no route to host"), errors.New("network is unreachable")
	var got []bool
	for _, err := range []error{unreachable, unreachable, gone, unreachable} {
		if changed := table.changed([]podRoute{route}); len(changed) != 1 {
			t.Fatalf("after a failure, changed() = %v; want the route again (retried)", changed)
		}
		got = append(got, table.failed(route.dst.String(), err))
	}
	if want := []bool{true, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("failed() reported %v, want %v (the first failure and each change of error)", got, want)
	}
	table.changed([]podRoute{route})
	if !table.installed(route.dst.String()) {
		t.Error("installed() after failures = false, want true (a recovery to log)")
	}
	if table.installed(route.dst.String()) {
		t.Error("installed() again = true, want false (nothing failing)")
	}
	if !table.failed(route.dst.String(), unreachable) {
		t.Error("failed() after a recovery = false, want true (a new failure)")
	}
	// A node gone (its route no longer wanted) leaves no failure behind.
	table.pruneFailing(map[string]string{})
	if !table.failed(route.dst.String(), unreachable) {
		t.Error("failed() after the route was pruned = false, want true (a new failure)")
	}
}
