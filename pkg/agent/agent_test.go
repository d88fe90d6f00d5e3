package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/join"
)

func TestKubeletConfigCarriesTheServersLeaseProfile(t *testing.T) {
	s := join.Settings{RenewInterval: 30 * time.Second, LeaseDurationSeconds: 120, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a"}
	out := kubeletConfig(paths{data: "/d"}, s, "/k1m/n1", "unix:///run/c.sock", "/d/pod-logs")
	for _, want := range []string{"nodeLeaseRenewInterval: 30s", "nodeLeaseDurationSeconds: 120", `clusterDNS: ["fddf:4035:b510::a"]`,
		"cgroupDriver: cgroupfs", `cgroupRoot: "/k1m/n1"`, `podLogsDir: "/d/pod-logs"`, "anonymous: {enabled: false}", "authorization: {mode: Webhook}"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet config lacks %q:\n%s", want, out)
		}
	}
}

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
