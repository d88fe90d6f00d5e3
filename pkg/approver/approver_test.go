package approver

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"k1m.dev/k1m/pkg/podnet"
)

const group = "system:bootstrappers:k1m:default-node-token"

func newKey(t *testing.T) crypto.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type request struct {
	name, cn, signer, user string
	groups                 []string
	key                    crypto.Signer
	ips                    []net.IP
	dns                    []string
	conditions             []certv1.CertificateSigningRequestCondition
}

func (r request) csr(t *testing.T) *certv1.CertificateSigningRequest {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: r.cn, Organization: []string{"system:nodes"}}, IPAddresses: r.ips, DNSNames: r.dns}, r.key)
	if err != nil {
		t.Fatal(err)
	}
	u := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
	if r.signer == certv1.KubeletServingSignerName {
		u = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	}
	return &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: r.signer, Username: r.user, Groups: r.groups, Usages: u,
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})},
		Status: certv1.CertificateSigningRequestStatus{Conditions: r.conditions},
	}
}

func joinRequest(name, node string, key crypto.Signer) request {
	return request{name: name, cn: "system:node:" + node, signer: certv1.KubeAPIServerClientKubeletSignerName,
		user: "system:bootstrap:abcdef", groups: []string{"system:bootstrappers", group, "system:authenticated"}, key: key}
}

func serving(name, node string, ips []net.IP, dns []string) request {
	return request{name: name, cn: "system:node:" + node, signer: certv1.KubeletServingSignerName,
		user: "system:node:" + node, groups: []string{"system:nodes", "system:authenticated"}, ips: ips, dns: dns}
}

// approvedJoin is a join request for node that was approved before.
func approvedJoin(t *testing.T, name, node string, key crypto.Signer) *certv1.CertificateSigningRequest {
	r := joinRequest(name, node, key)
	r.conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateApproved, Status: corev1.ConditionTrue}}
	return r.csr(t)
}

func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

// decided runs Sync on the CSR named want and returns its one new
// condition (nil: left pending).
func decided(t *testing.T, objects []runtime.Object, want string) (*certv1.CertificateSigningRequestCondition, error) {
	t.Helper()
	client := fake.NewSimpleClientset(objects...)
	a := withCache(&Approver{Client: client, BootstrapGroup: group, ControlPlane: testControlPlane, Self: testSelf}, objects...)
	before, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), want, metav1.GetOptions{})
	err := a.Sync(context.Background(), want)
	after, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), want, metav1.GetOptions{})
	if len(after.Status.Conditions) == len(before.Status.Conditions) {
		return nil, err
	}
	c := after.Status.Conditions[len(after.Status.Conditions)-1]
	return &c, err
}

func TestJoinTokenGetsANewNodeButNeverAnExistingOne(t *testing.T) {
	key, otherKey := newKey(t), newKey(t)
	ip := net.ParseIP("fddf:4035:b520::11")
	cases := []struct {
		name    string
		objects []runtime.Object
		want    certv1.RequestConditionType
		reason  string
		message string
	}{
		{"a new name", []runtime.Object{joinRequest("csr-a", "agent-1", key).csr(t)}, certv1.CertificateApproved, ReasonApproved,
			"new node agent-1 joined with a token of " + group},
		{"a name that is a Node", []runtime.Object{joinRequest("csr-a", "agent-1", key).csr(t), node("agent-1")}, certv1.CertificateDenied, ReasonNodeExists,
			"node agent-1 exists already: a join token adds new nodes and cannot take over one; to join a machine again under this name, delete the Node first (k1m kubectl delete node agent-1)"},
		{"a name already issued to another key", []runtime.Object{joinRequest("csr-a", "agent-1", key).csr(t), approvedJoin(t, "csr-first", "agent-1", otherKey)},
			certv1.CertificateDenied, ReasonNameTaken,
			"a client certificate for node agent-1 was issued to another key (CSR csr-first): a join token cannot take over a node name; delete that CSR if the machine it went to is gone"},
		{"the same key asking again", []runtime.Object{joinRequest("csr-a", "agent-1", key).csr(t), approvedJoin(t, "csr-first", "agent-1", key)},
			certv1.CertificateApproved, ReasonApproved, "new node agent-1 joined with a token of " + group},
		{"a client request with an IP SAN", []runtime.Object{func() runtime.Object {
			r := joinRequest("csr-a", "agent-1", key)
			r.ips = []net.IP{ip}
			return r.csr(t)
		}()},
			certv1.CertificateDenied, ReasonInvalidRequest, "not a kubelet client certificate request: IP subjectAltNames are not allowed"},
		{"an upper-case node name", []runtime.Object{joinRequest("csr-a", "Agent-1", key).csr(t)}, certv1.CertificateDenied, ReasonInvalidRequest,
			`node name "Agent-1" is not a lower-case DNS-1123 subdomain: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}
	for _, c := range cases {
		got, err := decided(t, c.objects, "csr-a")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got == nil || got.Type != c.want || got.Reason != c.reason || got.Message != c.message {
			t.Errorf("%s:\n got %+v\nwant %s %s %q", c.name, got, c.want, c.reason, c.message)
		}
	}
}

func TestRenewalsAndOtherSignersAreLeftAlone(t *testing.T) {
	renewal := joinRequest("csr-a", "agent-1", newKey(t))
	renewal.user, renewal.groups = "system:node:agent-1", []string{"system:nodes", "system:authenticated"}
	other := joinRequest("csr-b", "agent-1", newKey(t))
	other.signer = "example.com/signer"
	for _, r := range []request{renewal, other} {
		got, err := decided(t, []runtime.Object{r.csr(t)}, r.name)
		if err != nil || got != nil {
			t.Errorf("%s: decided %+v, %v; want it left to the controller manager", r.name, got, err)
		}
	}
}

func TestServingCertificateOnlyForTheNodesOwnAddresses(t *testing.T) {
	own := net.ParseIP("fddf:4035:b520::11")
	n := node("agent-1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: own.String()}, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "agent-1"})
	key := newKey(t)
	withKey := func(r request) request { r.key = key; return r }
	cases := []struct {
		name            string
		req             request
		want            certv1.RequestConditionType
		reason, message string
	}{
		{"own address and name", withKey(serving("csr-a", "agent-1", []net.IP{own}, []string{"agent-1"})), certv1.CertificateApproved, ReasonApproved,
			"serving certificate for node agent-1's own addresses"},
		{"a foreign address", withKey(serving("csr-a", "agent-1", []net.IP{own, net.ParseIP("fddf:4035:b520::12")}, nil)), certv1.CertificateDenied, ReasonNotOwnAddress,
			"IP fddf:4035:b520::12 is not an address of node agent-1 (it has fddf:4035:b520::11)"},
		{"a foreign name", withKey(serving("csr-a", "agent-1", []net.IP{own}, []string{"agent-2"})), certv1.CertificateDenied, ReasonNotOwnAddress,
			"DNS name agent-2 is not a name of node agent-1 (it has agent-1)"},
		{"another node's request", func() request {
			r := withKey(serving("csr-a", "agent-1", []net.IP{own}, nil))
			r.user = "system:node:agent-2"
			return r
		}(), certv1.CertificateDenied, ReasonNotOwnNode, "system:node:agent-2 asked for a serving certificate of system:node:agent-1: a node may ask only for its own"},
	}
	for _, c := range cases {
		got, err := decided(t, []runtime.Object{c.req.csr(t), n}, "csr-a")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got == nil || got.Type != c.want || got.Reason != c.reason || got.Message != c.message {
			t.Errorf("%s:\n got %+v\nwant %s %s %q", c.name, got, c.want, c.reason, c.message)
		}
	}
	// Before the Node is registered the request waits.
	got, err := decided(t, []runtime.Object{withKey(serving("csr-a", "agent-1", []net.IP{own}, nil)).csr(t)}, "csr-a")
	var notYet errNotYet
	if got != nil || !errors.As(err, &notYet) {
		t.Errorf("no Node yet: decided %+v, %v; want it left pending", got, err)
	}
}

// testControlPlane is a cluster of two servers, server-1 (published with
// its node) and one known only from the kubernetes Service's endpoints.
var testControlPlane = ControlPlane{
	ServiceCIDR:   netip.MustParsePrefix("fddf:4035:b510::/108"),
	ClusterCIDR:   netip.MustParsePrefix("fddf:4035:b500::/44"),
	ClusterDomain: "cluster.local",
	Gateways:      []netip.Addr{netip.MustParseAddr("fddf:4035:b520::fffe")},
	Servers: func(context.Context) (map[string][]netip.Addr, error) {
		return map[string][]netip.Addr{"server-1": {netip.MustParseAddr("fddf:4035:b520::1")}, "": {netip.MustParseAddr("fddf:4035:b520::2")}}, nil
	},
}

// A node writes its own status: whatever it puts there, a serving
// certificate for a control-plane name or address is denied with a named
// reason (the attack: kubernetes.default.svc and the kubernetes Service IP
// added to the node's status, then asked for). A server's own node keeps
// its server's address and name.
func TestServingCertificateNeverForTheControlPlane(t *testing.T) {
	own := net.ParseIP("fddf:4035:b520::11")
	claimed := []string{"fddf:4035:b510::1", "::1", "127.0.0.1", "fe80::1", "fddf:4035:b520::1", "fddf:4035:b520::2", "fddf:4035:b500:1::5", "fddf:4035:b520::fffe"}
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: own.String()}, {Type: corev1.NodeHostName, Address: "agent-1"}}
	for _, ip := range claimed {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
	}
	for _, name := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "web.default.svc", "localhost", "api.localhost", "x.pod.cluster.local", "server-1"} {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: name})
	}
	attacker := node("agent-1", addrs...)
	const tail = ": a kubelet serving certificate may name only the node's own "
	cases := []struct {
		name    string
		ips     []net.IP
		dns     []string
		message string
	}{
		{"the kubernetes Service IP", []net.IP{own, net.ParseIP("fddf:4035:b510::1")}, nil,
			"IP fddf:4035:b510::1 is in the service range fddf:4035:b510::/108 (the kubernetes Service and every ClusterIP)" + tail + "addresses"},
		{"IPv6 loopback", []net.IP{net.ParseIP("::1")}, nil, "IP ::1 is a loopback, link-local, multicast or unspecified address" + tail + "addresses"},
		{"IPv4 loopback", []net.IP{net.ParseIP("127.0.0.1")}, nil, "IP 127.0.0.1 is a loopback, link-local, multicast or unspecified address" + tail + "addresses"},
		{"link-local", []net.IP{net.ParseIP("fe80::1")}, nil, "IP fe80::1 is a loopback, link-local, multicast or unspecified address" + tail + "addresses"},
		{"a published server's address", []net.IP{net.ParseIP("fddf:4035:b520::1")}, nil, "IP fddf:4035:b520::1 is an address of server server-1" + tail + "addresses"},
		{"an API server endpoint", []net.IP{net.ParseIP("fddf:4035:b520::2")}, nil, "IP fddf:4035:b520::2 is an address of kube-apiserver" + tail + "addresses"},
		{"a pod's address", []net.IP{own, net.ParseIP("fddf:4035:b500:1::5")}, nil,
			"IP fddf:4035:b500:1::5 is in the cluster CIDR fddf:4035:b500::/44 (the pods' ranges)" + tail + "addresses"},
		{"the gateway", []net.IP{own, net.ParseIP("fddf:4035:b520::fffe")}, nil,
			"IP fddf:4035:b520::fffe is the node network's gateway (a default route's gateway of the server)" + tail + "addresses"},
		{"kubernetes.default.svc", []net.IP{own}, []string{"kubernetes.default.svc"},
			"DNS name kubernetes.default.svc is a Service name (kube-apiserver's certificate names kubernetes.default.svc)" + tail + "names"},
		{"kubernetes", []net.IP{own}, []string{"kubernetes"}, "DNS name kubernetes is a Service name (kube-apiserver's certificate names kubernetes.default.svc)" + tail + "names"},
		{"the full Service name", []net.IP{own}, []string{"kubernetes.default.svc.cluster.local"},
			"DNS name kubernetes.default.svc.cluster.local is a Service name (kube-apiserver's certificate names kubernetes.default.svc)" + tail + "names"},
		{"another Service", []net.IP{own}, []string{"web.default.svc"}, "DNS name web.default.svc is a Service name (kube-apiserver's certificate names kubernetes.default.svc)" + tail + "names"},
		{"localhost", []net.IP{own}, []string{"localhost"}, "DNS name localhost is loopback" + tail + "names"},
		{"under localhost", []net.IP{own}, []string{"api.localhost"}, "DNS name api.localhost is loopback" + tail + "names"},
		{"the cluster domain", []net.IP{own}, []string{"x.pod.cluster.local"}, "DNS name x.pod.cluster.local is in the cluster domain cluster.local" + tail + "names"},
		{"a server's node name", []net.IP{own}, []string{"server-1"},
			"DNS name server-1 is the node name of server server-1, which kube-apiserver's certificate names" + tail + "names"},
	}
	for _, c := range cases {
		r := serving("csr-a", "agent-1", c.ips, c.dns)
		r.key = newKey(t)
		got, err := decided(t, []runtime.Object{r.csr(t), attacker}, "csr-a")
		if err != nil || got == nil || got.Type != certv1.CertificateDenied || got.Reason != ReasonControlPlane || got.Message != c.message {
			t.Errorf("%s: %v\n got %+v\nwant Denied %s %q", c.name, err, got, ReasonControlPlane, c.message)
		}
	}
	// The positive control: server-1's own node, for its own address and name.
	server := node("server-1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fddf:4035:b520::1"}, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "server-1"})
	r := serving("csr-a", "server-1", []net.IP{net.ParseIP("fddf:4035:b520::1")}, []string{"server-1"})
	r.key = newKey(t)
	got, err := decided(t, []runtime.Object{r.csr(t), server}, "csr-a")
	if err != nil || got == nil || got.Type != certv1.CertificateApproved {
		t.Errorf("a server's node for its own address and name: %+v, %v; want Approved", got, err)
	}
}

// The servers' addresses come from the published servers, this server and
// the kubernetes Service's endpoints.
func TestServersOf(t *testing.T) {
	client := fake.NewSimpleClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "k1m-server-bootstrap"},
			Data: map[string]string{"server.server-2": "https://[fddf:4035:b520::2]:6443", "token.abcdef": "sealed"}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fddf:4035:b520::1"}}, {Addresses: []string{"fddf:4035:b520::2"}}, {Addresses: []string{"fddf:4035:b520::3"}}}},
	)
	got, err := ServersOf(client, "server-1", []netip.Addr{netip.MustParseAddr("fddf:4035:b520::1")})(context.Background())
	want := map[string][]netip.Addr{
		"server-1": {netip.MustParseAddr("fddf:4035:b520::1")},
		"server-2": {netip.MustParseAddr("fddf:4035:b520::2")},
		"":         {netip.MustParseAddr("fddf:4035:b520::3")},
	}
	if err != nil || !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ServersOf: %v, %v; want %v", got, err, want)
	}
}

// withCache gives a the caches Run would fill from the informers: the
// CSRs, the Nodes and the servers' names, transformed as Run's are.
func withCache(a *Approver, objects ...runtime.Object) *Approver {
	a.csrs = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{approvedClientName: indexApprovedClientName})
	a.nodes = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nodeIndexers)
	a.servers = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	a.routes = cache.NewIndexer(cache.MetaNamespaceKeyFunc, routeIndexers)
	for _, o := range objects {
		switch o := o.(type) {
		case *certv1.CertificateSigningRequest:
			a.csrs.Add(o)
		case *corev1.Node:
			stripped, _ := stripNode(o)
			a.nodes.Add(stripped)
		case *corev1.ConfigMap:
			if o.Namespace == podnet.RoutesNamespace {
				a.routes.Add(o)
				continue
			}
			stripped, _ := stripServerBootstrap(o)
			a.servers.Add(stripped)
		}
	}
	return a
}

// Two requests for one new node name with two keys, decided by several
// workers before the cache shows either approval: exactly one is
// approved.
func TestOneKeyPerNameAcrossWorkers(t *testing.T) {
	var objects []runtime.Object
	for i := range 8 {
		objects = append(objects, joinRequest(fmt.Sprintf("csr-%d", i), "agent-1", newKey(t)).csr(t))
	}
	client := fake.NewSimpleClientset(objects...)
	a := withCache(&Approver{Client: client, BootstrapGroup: group, ControlPlane: testControlPlane}) // an empty cache: it lags
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); a.Sync(context.Background(), fmt.Sprintf("csr-%d", i)) }()
	}
	wg.Wait()
	approvedCount := 0
	for i := range 8 {
		csr, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), fmt.Sprintf("csr-%d", i), metav1.GetOptions{})
		if approved(csr) {
			approvedCount++
		}
	}
	if approvedCount != 1 {
		t.Errorf("%d of 8 requests for one name with 8 keys approved, want 1", approvedCount)
	}
}

// The approver of a server of several runs only while it holds the Lease:
// a second one waits.
func TestRunElectedTakesTheLease(t *testing.T) {
	client := fake.NewSimpleClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Approver{Client: client, BootstrapGroup: group, ControlPlane: testControlPlane}).RunElected(ctx, "server-1")
	var holder string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, Election, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
			break
		}
	}
	if holder != "server-1" {
		t.Errorf("Lease kube-system/%s held by %q, want server-1", Election, holder)
	}
}

// Two servers' approvers, elected on one API, and two requests for one
// new node name with two keys: one approver decides both (the other
// none), one request is approved and the other denied (NodeNameTaken).
func TestTwoApproversOneDecisionPerName(t *testing.T) {
	client := fake.NewSimpleClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	decisions := map[string]int{}
	for _, id := range []string{"server-1", "server-2"} {
		a := &Approver{Client: client, BootstrapGroup: group, ControlPlane: testControlPlane}
		a.recorded = func(string) { mu.Lock(); decisions[id]++; mu.Unlock() }
		go a.RunElected(ctx, id)
	}
	for _, name := range []string{"csr-a", "csr-b"} {
		if _, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, joinRequest(name, "agent-1", newKey(t)).csr(t), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reasons := map[string]string{}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && len(reasons) < 2; time.Sleep(100 * time.Millisecond) {
		for _, name := range []string{"csr-a", "csr-b"} {
			csr, _ := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			for _, c := range csr.Status.Conditions {
				reasons[name] = string(c.Type) + " " + c.Reason
			}
		}
	}
	got := slices.Sorted(maps.Values(reasons))
	if want := []string{"Approved " + ReasonApproved, "Denied " + ReasonNameTaken}; !slices.Equal(got, want) {
		t.Errorf("two approvers, two keys for one name: %v, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if counts := slices.Sorted(maps.Values(decisions)); !slices.Equal(counts, []int{2}) {
		t.Errorf("decisions by approver %v, want both by one", decisions)
	}
}

// An approval remembered for a name is forgotten once the cache shows the
// approved CSR: the memory holds joins in flight only.
func TestRememberedApprovalForgottenWhenShown(t *testing.T) {
	r := joinRequest("csr-a", "agent-1", newKey(t))
	client := fake.NewSimpleClientset(r.csr(t))
	a := withCache(&Approver{Client: client, BootstrapGroup: group, ControlPlane: testControlPlane})
	if err := a.Sync(context.Background(), "csr-a"); err != nil {
		t.Fatal(err)
	}
	if len(a.names.approved) != 1 {
		t.Fatalf("%d approvals remembered after one join, want 1", len(a.names.approved))
	}
	shown, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "csr-a", metav1.GetOptions{})
	a.forgetShown(shown)
	if len(a.names.approved) != 0 {
		t.Errorf("%d approvals remembered once the cache shows the CSR, want 0", len(a.names.approved))
	}
}

// A removed server's name is released: its node's client certificate
// requests go, and nothing else. A join token still cannot take the name:
// the approver's record keeps it (servernames.go).
func TestReleaseNodeName(t *testing.T) {
	servingReq := serving("csr-serving", "k1m-server-2", nil, []string{"k1m-server-2"})
	servingReq.key = newKey(t)
	objects := []runtime.Object{
		approvedJoin(t, "csr-gone", "k1m-server-2", newKey(t)),
		approvedJoin(t, "csr-other", "k1m-server-3", newKey(t)),
		servingReq.csr(t),
	}
	client := fake.NewSimpleClientset(objects...)
	deleted, err := ReleaseNodeName(context.Background(), client, "k1m-server-2")
	if err != nil || !slices.Equal(deleted, []string{"csr-gone"}) {
		t.Fatalf("ReleaseNodeName = %v, %v; want [csr-gone]", deleted, err)
	}
	left, err := client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range left.Items {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if want := []string{"csr-other", "csr-serving"}; !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
	rejoin := joinRequest("csr-rejoin", "k1m-server-2", newKey(t)).csr(t)
	removed := serverBootstrap(map[string]string{serverNamesKey: `["k1m-server-2"]`})
	cond, err := decided(t, []runtime.Object{rejoin, &left.Items[0], &left.Items[1], removed}, "csr-rejoin")
	if err != nil || cond == nil || cond.Type != certv1.CertificateDenied || cond.Reason != ReasonServerName {
		t.Errorf("a join token under the released name: %+v, %v; want denied, %s", cond, err, ReasonServerName)
	}
}
