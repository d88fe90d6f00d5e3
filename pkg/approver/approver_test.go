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
	"net"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
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

func join(name, node string, key crypto.Signer) request {
	return request{name: name, cn: "system:node:" + node, signer: certv1.KubeAPIServerClientKubeletSignerName,
		user: "system:bootstrap:abcdef", groups: []string{"system:bootstrappers", group, "system:authenticated"}, key: key}
}

func serving(name, node string, ips []net.IP, dns []string) request {
	return request{name: name, cn: "system:node:" + node, signer: certv1.KubeletServingSignerName,
		user: "system:node:" + node, groups: []string{"system:nodes", "system:authenticated"}, ips: ips, dns: dns}
}

// approvedJoin is a join request for node that was approved before.
func approvedJoin(t *testing.T, name, node string, key crypto.Signer) *certv1.CertificateSigningRequest {
	r := join(name, node, key)
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
	a := &Approver{Client: client, BootstrapGroup: group}
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
		{"a new name", []runtime.Object{join("csr-a", "agent-1", key).csr(t)}, certv1.CertificateApproved, ReasonApproved,
			"new node agent-1 joined with a token of " + group},
		{"a name that is a Node", []runtime.Object{join("csr-a", "agent-1", key).csr(t), node("agent-1")}, certv1.CertificateDenied, ReasonNodeExists,
			"node agent-1 exists already: a join token adds new nodes and cannot take over one; to join a machine again under this name, delete the Node first (k1m kubectl delete node agent-1)"},
		{"a name already issued to another key", []runtime.Object{join("csr-a", "agent-1", key).csr(t), approvedJoin(t, "csr-first", "agent-1", otherKey)},
			certv1.CertificateDenied, ReasonNameTaken,
			"a client certificate for node agent-1 was issued to another key (CSR csr-first): a join token cannot take over a node name; delete that CSR if the machine it went to is gone"},
		{"the same key asking again", []runtime.Object{join("csr-a", "agent-1", key).csr(t), approvedJoin(t, "csr-first", "agent-1", key)},
			certv1.CertificateApproved, ReasonApproved, "new node agent-1 joined with a token of " + group},
		{"a client request with an IP SAN", []runtime.Object{func() runtime.Object { r := join("csr-a", "agent-1", key); r.ips = []net.IP{ip}; return r.csr(t) }()},
			certv1.CertificateDenied, ReasonInvalidRequest, "not a kubelet client certificate request: IP subjectAltNames are not allowed"},
		{"an upper-case node name", []runtime.Object{join("csr-a", "Agent-1", key).csr(t)}, certv1.CertificateDenied, ReasonInvalidRequest,
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
	renewal := join("csr-a", "agent-1", newKey(t))
	renewal.user, renewal.groups = "system:node:agent-1", []string{"system:nodes", "system:authenticated"}
	other := join("csr-b", "agent-1", newKey(t))
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
		{"a foreign address", withKey(serving("csr-a", "agent-1", []net.IP{own, net.ParseIP("fddf:4035:b520::1")}, nil)), certv1.CertificateDenied, ReasonNotOwnAddress,
			"IP fddf:4035:b520::1 is not an address of node agent-1 (it has fddf:4035:b520::11)"},
		{"a foreign name", withKey(serving("csr-a", "agent-1", []net.IP{own}, []string{"kubernetes.default"})), certv1.CertificateDenied, ReasonNotOwnAddress,
			"DNS name kubernetes.default is not a name of node agent-1 (it has agent-1)"},
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
