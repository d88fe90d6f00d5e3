package approver

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/podnet"
)

// nodeAt is a Node created at created.
func nodeAt(name string, created time.Time, addrs ...corev1.NodeAddress) *corev1.Node {
	n := node(name, addrs...)
	n.CreationTimestamp = metav1.NewTime(created)
	return n
}

func ipAddr(t corev1.NodeAddressType, ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: t, Address: ip}
}

type servingCase struct {
	name            string
	objects         []runtime.Object
	req             request
	want            certv1.RequestConditionType
	reason, message string
}

func (c servingCase) check(t *testing.T) {
	t.Helper()
	c.req.key = newKey(t)
	got, err := decided(t, append([]runtime.Object{c.req.csr(t)}, c.objects...), c.req.name)
	if err != nil || got == nil || got.Type != c.want || got.Reason != c.reason || got.Message != c.message {
		t.Errorf("%s: %v\n got %+v\nwant %s %s %q", c.name, err, got, c.want, c.reason, c.message)
	}
}

// The attack: k1m-node-1, with its own credentials, copies k1m-node-2's
// address and name into its own status and asks for a serving
// certificate for them. What another Node had first, and another Node's
// name, are refused, naming both nodes; the first owner keeps its own.
func TestServingCertificateNeverAnotherNodes(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	own, theirs := "fddf:4035:b520::11", "fddf:4035:b520::12"
	victim := nodeAt("k1m-node-2", t0, ipAddr(corev1.NodeInternalIP, theirs), ipAddr(corev1.NodeHostName, "k1m-node-2"),
		ipAddr(corev1.NodeExternalDNS, "web.example.org"))
	attacker := nodeAt("k1m-node-1", t0.Add(time.Hour), ipAddr(corev1.NodeInternalIP, own), ipAddr(corev1.NodeHostName, "k1m-node-1"),
		ipAddr(corev1.NodeExternalIP, theirs), ipAddr(corev1.NodeInternalDNS, "k1m-node-2"), ipAddr(corev1.NodeExternalDNS, "web.example.org"))
	both := []runtime.Object{victim, attacker}
	ips := func(s ...string) []net.IP {
		var out []net.IP
		for _, ip := range s {
			out = append(out, net.ParseIP(ip))
		}
		return out
	}
	for _, c := range []servingCase{
		{"another node's IP", both, serving("csr-a", "k1m-node-1", ips(own, theirs), nil), certv1.CertificateDenied, ReasonAddressOfAnotherNode,
			"IP fddf:4035:b520::12 is an address of node k1m-node-2, which had it first: node k1m-node-1's status claims node k1m-node-2's address"},
		{"another node's name", both, serving("csr-a", "k1m-node-1", ips(own), []string{"k1m-node-2"}), certv1.CertificateDenied, ReasonNameOfAnotherNode,
			"DNS name k1m-node-2 is the name of node k1m-node-2: node k1m-node-1 may not name another node in its serving certificate"},
		{"a DNS name another node had first", both, serving("csr-a", "k1m-node-1", ips(own), []string{"web.example.org"}), certv1.CertificateDenied, ReasonAddressOfAnotherNode,
			"DNS name web.example.org is a name of node k1m-node-2, which had it first: node k1m-node-1's status claims node k1m-node-2's name"},
		{"the first owner of the shared address and name", both, serving("csr-a", "k1m-node-2", ips(theirs), []string{"k1m-node-2", "web.example.org"}),
			certv1.CertificateApproved, ReasonApproved, "serving certificate for node k1m-node-2's own addresses"},
		{"the later node's own address and name", both, serving("csr-a", "k1m-node-1", ips(own), []string{"k1m-node-1"}),
			certv1.CertificateApproved, ReasonApproved, "serving certificate for node k1m-node-1's own addresses"},
		{"created at once: the first name keeps it", []runtime.Object{
			nodeAt("k1m-node-a", t0, ipAddr(corev1.NodeInternalIP, theirs)), nodeAt("k1m-node-b", t0, ipAddr(corev1.NodeInternalIP, theirs))},
			serving("csr-a", "k1m-node-b", ips(theirs), nil), certv1.CertificateDenied, ReasonAddressOfAnotherNode,
			"IP fddf:4035:b520::12 is an address of node k1m-node-a, which had it first: node k1m-node-b's status claims node k1m-node-a's address"},
		{"created at once: the first name's own", []runtime.Object{
			nodeAt("k1m-node-a", t0, ipAddr(corev1.NodeInternalIP, theirs)), nodeAt("k1m-node-b", t0, ipAddr(corev1.NodeInternalIP, theirs))},
			serving("csr-a", "k1m-node-a", ips(theirs), nil), certv1.CertificateApproved, ReasonApproved, "serving certificate for node k1m-node-a's own addresses"},
		{"its own name in an older node's status", []runtime.Object{
			nodeAt("k1m-node-a", t0, ipAddr(corev1.NodeInternalIP, theirs), ipAddr(corev1.NodeInternalDNS, "k1m-node-b")),
			nodeAt("k1m-node-b", t0.Add(time.Hour), ipAddr(corev1.NodeInternalIP, own))},
			serving("csr-a", "k1m-node-b", ips(own), []string{"k1m-node-b"}), certv1.CertificateApproved, ReasonApproved, "serving certificate for node k1m-node-b's own addresses"},
	} {
		c.check(t)
	}
}

// The address a node is routed through, bound by the pod route publisher
// at its join, is its own whatever the creation times: an older node
// copying it is refused, and its owner keeps it.
func TestServingCertificateFollowsTheRouteBinding(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	older := nodeAt("k1m-node-1", t0, ipAddr(corev1.NodeInternalIP, "fddf:4035:b520::11"), ipAddr(corev1.NodeExternalIP, "fddf:4035:b520::12"))
	newer := nodeAt("k1m-node-2", t0.Add(time.Hour), ipAddr(corev1.NodeInternalIP, "fddf:4035:b520::12"))
	older.UID, newer.UID = "uid-1", "uid-2"
	route := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: podnet.RoutesNamespace, Name: "k1m-node-2", Labels: map[string]string{podnet.RouteLabel: "true"}},
		Data: map[string]string{"podCIDRs": "fddf:4035:b500:2::/64", "via": "fddf:4035:b520::12", "nodeUID": "uid-2"}}
	objects := []runtime.Object{older, newer, route}
	for _, c := range []servingCase{
		{"an older node copying a bound address", objects, serving("csr-a", "k1m-node-1", []net.IP{net.ParseIP("fddf:4035:b520::12")}, nil), certv1.CertificateDenied, ReasonAddressOfAnotherNode,
			"IP fddf:4035:b520::12 is the address node k1m-node-2 is routed through since its join: node k1m-node-1's status claims node k1m-node-2's address"},
		{"the bound owner", objects, serving("csr-a", "k1m-node-2", []net.IP{net.ParseIP("fddf:4035:b520::12")}, nil), certv1.CertificateApproved, ReasonApproved,
			"serving certificate for node k1m-node-2's own addresses"},
	} {
		c.check(t)
	}
}

// The Node cache keeps of each Node only what ownership needs.
func TestStripNode(t *testing.T) {
	n := nodeAt("k1m-node-1", time.Unix(1, 0), ipAddr(corev1.NodeInternalIP, "fddf:4035:b520::11"))
	n.UID, n.Labels, n.ResourceVersion = "u1", map[string]string{"a": "b"}, "7"
	n.Spec.PodCIDRs = []string{"fddf:4035:b500:1::/64"}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"pause"}}}
	got, _ := stripNode(n)
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k1m-node-1", UID: "u1", CreationTimestamp: n.CreationTimestamp},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stripNode = %+v, want %+v", got, want)
	}
}

// A node that wrote an address into its status just before asking is
// not denied because the approver's cache lags: the Node is read before a
// denial.
func TestServingCertificateReadsTheNodeBeforeDenying(t *testing.T) {
	own, added := "fddf:4035:b520::11", "fddf:4035:b520::31"
	cached := node("agent-1", ipAddr(corev1.NodeInternalIP, own))
	now := node("agent-1", ipAddr(corev1.NodeInternalIP, own), ipAddr(corev1.NodeExternalIP, added))
	req := serving("csr-a", "agent-1", []net.IP{net.ParseIP(own), net.ParseIP(added)}, nil)
	req.key = newKey(t)
	csr := req.csr(t)
	client := fake.NewSimpleClientset(csr, now)
	a := withCache(&Approver{Client: client, BootstrapGroup: group, ControlPlane: testControlPlane, Self: testSelf}, csr, cached)
	if err := a.Sync(context.Background(), "csr-a"); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "csr-a", metav1.GetOptions{})
	want := "serving certificate for node agent-1's own addresses"
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != certv1.CertificateApproved || got.Status.Conditions[0].Message != want {
		t.Errorf("conditions %+v, want Approved %q", got.Status.Conditions, want)
	}
}
