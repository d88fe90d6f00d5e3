package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/approver"
	"k1m.dev/k1m/pkg/podnet"
	"k1m.dev/k1m/pkg/testutil"
)

// A node proves and routes only itself (docs/security.md's threat model):
// what a join-token holder or a node's own credentials may not do, each
// tried as the attacker would and each refused.
func testNodeIdentity(ctx context.Context, t *testing.T, c *cluster) {
	t.Run("NodeCredentialRBAC", func(t *testing.T) { testNodeRBAC(ctx, t, c) })
	t.Run("JoinTokenCannotInjectARoute", func(t *testing.T) { testRouteInjection(ctx, t, c) })
	t.Run("NodeCannotGetAServingCertificateForAnotherNode", func(t *testing.T) { testServingForAnotherNode(ctx, t, c) })
	t.Run("JoinTokenCannotTakeAServersName", func(t *testing.T) { testServerNameReserved(ctx, t, c) })
}

// asNode is a client with node's own client certificate.
func (c *cluster) asNode(node string) kubernetes.Interface {
	cert := filepath.Join(c.nodeDir(node), "kubelet-pki", "kubelet-client-current.pem")
	return c.clientWithCertificate(cert)
}

// clientWithCertificate is a client with the certificate and key in the
// PEM file certAndKey, read now (testutil.InlineTLS).
func (c *cluster) clientWithCertificate(certAndKey string) kubernetes.Interface {
	cfg, err := testutil.InlineTLS(&rest.Config{Host: serverURL,
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.tlsFile("ca.crt"), CertFile: certAndKey, KeyFile: certAndKey}})
	if err != nil {
		panic(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// testNodeRBAC tries, with k1m-node-1's credentials, what a node never
// needs and could harm others with: each must be 403 Forbidden.
func testNodeRBAC(ctx context.Context, t *testing.T, c *cluster) {
	node := c.asNode("k1m-node-1")
	cm := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "k1m-node-1-was-here", Namespace: ns}, Data: map[string]string{"podCIDRs": "::/0", "via": "fddf:4035:b520::11"}}
	}
	for _, try := range []struct {
		what string
		do   func() error
	}{
		{"create a ConfigMap in k1m-pod-routes", func() error {
			_, err := node.CoreV1().ConfigMaps(podnet.RoutesNamespace).Create(ctx, cm(podnet.RoutesNamespace), metav1.CreateOptions{})
			return err
		}},
		{"update another node's route", func() error {
			_, err := node.CoreV1().ConfigMaps(podnet.RoutesNamespace).Update(ctx, cm(podnet.RoutesNamespace), metav1.UpdateOptions{})
			return err
		}},
		{"create a ConfigMap in kube-public", func() error {
			_, err := node.CoreV1().ConfigMaps("kube-public").Create(ctx, cm("kube-public"), metav1.CreateOptions{})
			return err
		}},
		{"create a ConfigMap in kube-system", func() error {
			_, err := node.CoreV1().ConfigMaps("kube-system").Create(ctx, cm("kube-system"), metav1.CreateOptions{})
			return err
		}},
		{"read kube-system/k1m-server-bootstrap", func() error {
			_, err := node.CoreV1().ConfigMaps("kube-system").Get(ctx, "k1m-server-bootstrap", metav1.GetOptions{})
			return err
		}},
		{"list the bootstrap-token Secrets", func() error {
			_, err := node.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "type=bootstrap.kubernetes.io/token"})
			return err
		}},
		{"read a bootstrap-token Secret", func() error {
			_, err := node.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+c.serverToken(t).TokenID(), metav1.GetOptions{})
			return err
		}},
		{"patch another node's status", func() error {
			_, err := node.CoreV1().Nodes().Patch(ctx, "k1m-node-2", types.StrategicMergePatchType, []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"fddf:4035:b520::11"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"create another Node", func() error {
			_, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k1m-node-1-twin"}}, metav1.CreateOptions{})
			return err
		}},
	} {
		if err := try.do(); !apierrors.IsForbidden(err) {
			t.Errorf("as k1m-node-1, %s: %v, want 403 Forbidden", try.what, err)
		}
	}
}

// joinAs gets, as a join-token holder would, a client certificate for a
// new node name and returns a client with it.
func (c *cluster) joinAs(ctx context.Context, t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "k1m-join-" + node},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: certv1.KubeAPIServerClientKubeletSignerName,
			Usages:  []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
	boot := c.bootstrapClient(t, c.serverToken(t))
	if _, err := boot.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a join token holder may ask for a client certificate: %v", err)
	}
	t.Cleanup(func() {
		c.client.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csr.Name, metav1.DeleteOptions{})
	})
	var certPEM []byte
	testutil.Eventually(t, time.Minute, "node "+node+"'s client certificate signed", func() error {
		got, err := c.client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if certPEM = got.Status.Certificate; len(certPEM) == 0 {
			return fmt.Errorf("not signed yet: conditions %v", got.Status.Conditions)
		}
		return nil
	})
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: serverURL, TLSClientConfig: rest.TLSClientConfig{CAFile: c.tlsFile("ca.crt"),
		CertData: certPEM, KeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}})
}

// nodeAddress is node's IPv6 InternalIP as the API shows it.
func (c *cluster) nodeAddress(ctx context.Context, t *testing.T, node string) string {
	t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP: %v", node, n.Status.Addresses)
	return ""
}

// routeNamespaces are the network namespaces of the cluster's machines:
// the server's (the host's) and each agent's.
func routeNamespaces() []string { return []string{"", "k1m-node-1", "k1m-node-2"} }

// kernelRoutesTo lists, in netns ("" the host's), the routes to dst.
func kernelRoutesTo(t *testing.T, netns, dst string) string {
	t.Helper()
	args := []string{"-6", "route", "show", "to", "exact", dst}
	if netns != "" {
		args = append([]string{"netns", "exec", netns, "ip"}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// refusalEvents are the publisher's Events on node, by message.
func (c *cluster) refusalEvents(ctx context.Context, node string) []string {
	events, err := c.client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + podnet.ReasonRouteRefused})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range events.Items {
		out = append(out, e.Message)
	}
	return out
}

// testRouteInjection joins a node "k1m-evil" with the join token and
// tries to route other machines' traffic through itself or another node:
// a pod range it writes itself (another node's address, a server's, a /65
// of another node's range, everything), refused by the API server; an
// InternalIP of another node or of the server, refused by the route
// publisher with an Event; no route is installed anywhere. With an address
// of its own its route is published and installed, and goes with its Node.
func testRouteInjection(ctx context.Context, t *testing.T, c *cluster) {
	const evil = "k1m-evil"
	noKubelet := map[string]string{noKubeletLabel: "true"}
	node1, node2 := c.nodeAddress(ctx, t, "k1m-node-1"), c.nodeAddress(ctx, t, "k1m-node-2")
	server := strings.Trim(strings.TrimPrefix(serverURL, "https://["), "]:6443")
	node2Range := c.podRange(ctx, t, "k1m-node-2")
	half := netip.PrefixFrom(netip.MustParsePrefix(node2Range).Addr(), 65).String()
	asEvil := c.joinAs(ctx, t, evil)
	t.Cleanup(func() { c.client.CoreV1().Nodes().Delete(context.Background(), evil, metav1.DeleteOptions{}) })

	// 1. Pod ranges written by the node: refused at the API.
	for _, cidr := range []string{node2 + "/128", server + "/128", half, "::/0"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: evil, Labels: noKubelet}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}}}
		_, err := asEvil.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		want := "nodes \"k1m-evil\" is forbidden: ValidatingAdmissionPolicy 'k1m-node-pod-ranges' with binding 'k1m-node-pod-ranges' denied request: node k1m-evil: spec.podCIDRs is allocated by kube-controller-manager (node IPAM), never written by a node"
		if err == nil || err.Error() != want {
			t.Errorf("node %s created with spec.podCIDRs %s: %v\nwant %s", evil, cidr, err, want)
		}
	}
	// 2. Its own Node, without a range: the IPAM allocates one.
	if _, err := asEvil.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: evil, Labels: noKubelet}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node %s may register itself: %v", evil, err)
	}
	evilRange := c.podRange(ctx, t, evil)
	// 3. Its status claims another node's address, then the server's.
	for _, claim := range []struct{ addr, why string }{
		{node1, node1 + " is node k1m-node-1's address, which it had first: node k1m-evil's status claims another node's address"},
		{server, server + " is the address of server " + c.serverNode(ctx, t) + ": only that server's own node is routed through it"},
	} {
		setInternalIP(ctx, t, asEvil, evil, claim.addr)
		want := "status.addresses[InternalIP] of node k1m-evil is not routed: " + claim.why
		testutil.Eventually(t, 30*time.Second, "the route publisher's Event for "+claim.addr, func() error {
			if got := c.refusalEvents(ctx, evil); !slices.Contains(got, want) {
				return fmt.Errorf("events %q, want %q among them", got, want)
			}
			return nil
		})
		if _, err := c.client.CoreV1().ConfigMaps(podnet.RoutesNamespace).Get(ctx, evil, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("k1m-pod-routes/%s after its status claimed %s: %v, want NotFound", evil, claim.addr, err)
		}
		for _, ns := range routeNamespaces() {
			if got := kernelRoutesTo(t, ns, evilRange); got != "" {
				t.Errorf("netns %q routes k1m-evil's range: %s", ns, got)
			}
			if got := kernelRoutesTo(t, ns, node2+"/128"); got != "" {
				t.Errorf("netns %q routes node-2's address: %s", ns, got)
			}
		}
	}
	// 4. An address of its own: routed on every machine, until its Node
	// is deleted.
	own := "fddf:4035:b520::e0"
	setInternalIP(ctx, t, asEvil, evil, own)
	for _, ns := range routeNamespaces() {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("netns %q routes %s via %s", ns, evilRange, own), func() error {
			if got := kernelRoutesTo(t, ns, evilRange); !strings.HasPrefix(got, evilRange+" via "+own+" ") || !strings.Contains(got, "proto 75") {
				return fmt.Errorf("route %q", got)
			}
			return nil
		})
	}
	if err := c.client.CoreV1().Nodes().Delete(ctx, evil, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range routeNamespaces() {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("netns %q's route to %s removed with the Node", ns, evilRange), func() error {
			if got := kernelRoutesTo(t, ns, evilRange); got != "" {
				return fmt.Errorf("route %q", got)
			}
			return nil
		})
	}
}

func setInternalIP(ctx context.Context, t *testing.T, client kubernetes.Interface, node, addr string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":%q}]}}`, addr)
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("node %s writing its own status: %v", node, err)
	}
}

// podRange waits for node's pod range from the IPAM.
func (c *cluster) podRange(ctx context.Context, t *testing.T, node string) string {
	t.Helper()
	var cidr string
	testutil.Eventually(t, 30*time.Second, "node "+node+"'s pod range allocated", func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(n.Spec.PodCIDRs) == 0 {
			return fmt.Errorf("spec.podCIDRs empty")
		}
		cidr = n.Spec.PodCIDRs[0]
		return nil
	})
	return cidr
}

// serverNode is the server's own node name: the Node at the server's address.
func (c *cluster) serverNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && "https://["+a.Address+"]:6443" == serverURL {
				return n.Name
			}
		}
	}
	t.Fatalf("no Node has the server's address (%s)", serverURL)
	return ""
}

// csrDecision waits for CSR name's decision: its condition type, reason
// and message.
func (c *cluster) csrDecision(ctx context.Context, t *testing.T, name string) certv1.CertificateSigningRequestCondition {
	t.Helper()
	var decided certv1.CertificateSigningRequestCondition
	testutil.Eventually(t, time.Minute, "CSR "+name+" decided", func() error {
		got, err := c.client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Conditions) == 0 {
			return fmt.Errorf("still pending")
		}
		decided = got.Status.Conditions[0]
		return nil
	})
	return decided
}

// testServingForAnotherNode: k1m-node-1 writes node-2's address and name
// into its own status and asks for a serving certificate for them.
func testServingForAnotherNode(ctx context.Context, t *testing.T, c *cluster) {
	node2 := c.nodeAddress(ctx, t, "k1m-node-2")
	asNode1 := c.asNode("k1m-node-1")
	patch := fmt.Sprintf(`{"status":{"addresses":[{"type":"ExternalIP","address":%q},{"type":"InternalDNS","address":"k1m-node-2"}]}}`, node2)
	if _, err := asNode1.CoreV1().Nodes().Patch(ctx, "k1m-node-1", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("k1m-node-1 writing its own status: %v", err)
	}
	csr := servingCSR(t, "k1m-serving-another-node", "k1m-node-1", []string{"k1m-node-2"}, []net.IP{net.ParseIP(node2)})
	if _, err := asNode1.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a node may ask for serving certificates: %v", err)
	}
	defer c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{})
	got := c.csrDecision(ctx, t, csr.Name)
	want := certv1.CertificateSigningRequestCondition{Type: certv1.CertificateDenied, Reason: approver.ReasonAddressOfAnotherNode,
		Message: servingRefusalForNode2(node2)}
	if got.Type != want.Type || got.Reason != want.Reason || got.Message != want.Message {
		t.Errorf("k1m-node-1's CSR for node-2's address and name: %s %s (%s)\nwant %s %s (%s)", got.Type, got.Reason, got.Message, want.Type, want.Reason, want.Message)
	}
}

// testServerNameReserved: a join token asks for the server's node name.
func testServerNameReserved(ctx context.Context, t *testing.T, c *cluster) {
	server := c.serverNode(ctx, t)
	boot := c.bootstrapClient(t, c.serverToken(t))
	csr := kubeletClientCSR(t, "k1m-server-name", server)
	if _, err := boot.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a token holder may ask for certificates: %v", err)
	}
	defer c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{})
	got := c.csrDecision(ctx, t, csr.Name)
	if got.Type != certv1.CertificateDenied || got.Reason != approver.ReasonServerName || got.Message != serverNameRefusal(server) {
		t.Errorf("a join token's CSR for server %s's name: %s %s (%s)\nwant Denied %s (%s)", server, got.Type, got.Reason, got.Message, approver.ReasonServerName, serverNameRefusal(server))
	}
}

// servingRefusalForNode2 is the approver's reason for k1m-node-1's request
// naming node-2's address (bound to node-2 at its join by the route
// publisher).
func servingRefusalForNode2(node2 string) string {
	return "IP " + node2 + " is the address node k1m-node-2 is routed through since its join: node k1m-node-1's status claims node k1m-node-2's address"
}

// serverNameRefusal is the approver's reason for a join token's request
// for the lone server's node name.
func serverNameRefusal(server string) string {
	return "node name " + server + " is the name of server " + server + " (the approving server): a join token cannot take a server's name; a server's own node joins with the server's credentials; choose another --node-name"
}
