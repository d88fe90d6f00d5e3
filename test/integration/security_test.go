package integration

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/readiness"
	"k1m.dev/k1m/pkg/secretsenc"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
)

// Settings the cluster under test is started with (cluster.harness), so
// that the security features and pass-through flags are on end to end.
const (
	serverURL            = "https://[fddf:4035:b520::1]:6443"
	passThroughMaxPods   = 77  // --kubelet-arg=max-pods=77 (the server's node)
	passThroughTolerance = 123 // --kube-apiserver-arg=default-not-ready-toleration-seconds=123
)

func (c *cluster) securityServerArgs() []string {
	return []string{
		"--secrets-encryption",
		"--audit-log-path=" + c.auditLog(),
		"--kubelet-arg=max-pods=" + strconv.Itoa(passThroughMaxPods),
		"--kube-apiserver-arg=default-not-ready-toleration-seconds=" + strconv.Itoa(passThroughTolerance),
	}
}

func (c *cluster) auditLog() string { return filepath.Join(c.dataRoot, "server", "audit", "audit.log") }
func (c *cluster) tlsFile(name string) string {
	return filepath.Join(c.dataRoot, "server", "tls", name)
}
func (c *cluster) nodeDir(node string) string { return filepath.Join(c.dataRoot, "nodes", node) }

func (c *cluster) serverToken(t *testing.T) pki.Token {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.dataRoot, "server", "token"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := pki.ParseToken(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func testSecurity(ctx context.Context, t *testing.T, c *cluster) {
	t.Run("JoinTokenCannotTakeOverANode", func(t *testing.T) { testNoTakeover(ctx, t, c) })
	t.Run("ExpiredDeletedAndRotatedTokensJoinNothing", func(t *testing.T) { testTokenLifecycle(ctx, t, c) })
	t.Run("EtcdsRefuseNodeCertificates", func(t *testing.T) { testEtcdsRefuseOthers(t, c) })
	t.Run("EtcdSocketsServeRootOnly", func(t *testing.T) { testEtcdSockets(t, c) })
	t.Run("KubeletVerifiedAndRefusesAnonymous", func(t *testing.T) { testKubeletTLS(t, c) })
	t.Run("ReadinessNeedsAClusterClientCertificate", func(t *testing.T) { testReadinessEndpoint(t, c) })
	t.Run("NodeCannotGetAServingCertificateForTheAPIServer", func(t *testing.T) { testServingCertificateAttack(ctx, t, c) })
	t.Run("AdminRevocableSuperAdminBreakGlass", func(t *testing.T) { testAdminRevocable(ctx, t, c) })
	t.Run("ListenersMatchDocsSecurity", func(t *testing.T) { testListeners(t, c) })
	t.Run("SecretsEncryptedAtRestAndAudited", func(t *testing.T) { testSecretsAtRest(ctx, t, c) })
	t.Run("PassThroughFlags", func(t *testing.T) { testPassThrough(ctx, t, c) })
	t.Run("NodeProvesAndRoutesOnlyItself", func(t *testing.T) { testNodeIdentity(ctx, t, c) })
}

// bootstrapClient is what a join token holder can do with the API.
func (c *cluster) bootstrapClient(t *testing.T, token pki.Token) kubernetes.Interface {
	caPEM, err := os.ReadFile(c.tlsFile("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: serverURL, BearerToken: token.Secret, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}})
}

// kubeletClientCSR is the request the kubelet's TLS bootstrap makes.
func kubeletClientCSR(t *testing.T, name, node string) *certv1.CertificateSigningRequest {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: certv1.KubeAPIServerClientKubeletSignerName,
			Usages:  []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})},
	}
}

// servingCSR is node's request, named name, for a kubelet serving
// certificate for dnsNames and ips.
func servingCSR(t *testing.T, name, node string, dnsNames []string, ips []net.IP) *certv1.CertificateSigningRequest {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		DNSNames: dnsNames, IPAddresses: ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: certv1.KubeletServingSignerName,
			Usages:  []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth},
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

// testNoTakeover asks, as a join token holder, for the client certificate
// of a node that exists: the approver must deny it and nothing is signed.
// A new name, asked the same way, is approved (the positive control).
func testNoTakeover(ctx context.Context, t *testing.T, c *cluster) {
	boot := c.bootstrapClient(t, c.serverToken(t))
	for _, try := range []struct{ csr, node, want, reason string }{
		{"k1m-takeover", "k1m-node-1", string(certv1.CertificateDenied), approver.ReasonNodeExists},
		{"k1m-new-name", "k1m-never-registered", string(certv1.CertificateApproved), approver.ReasonApproved},
	} {
		if _, err := boot.CertificatesV1().CertificateSigningRequests().Create(ctx, kubeletClientCSR(t, try.csr, try.node), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a token holder may ask for certificates: %v", err)
		}
		defer c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, try.csr, metav1.DeleteOptions{})
		testutil.Eventually(t, time.Minute, "CSR "+try.csr+" decided", func() error {
			csr, err := c.client.CertificatesV1().CertificateSigningRequests().Get(ctx, try.csr, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range csr.Status.Conditions {
				if string(cond.Type) != try.want || cond.Reason != try.reason {
					t.Fatalf("CSR %s for node %s: %s %s (%s), want %s %s", try.csr, try.node, cond.Type, cond.Reason, cond.Message, try.want, try.reason)
				}
				return nil
			}
			return fmt.Errorf("still pending")
		})
	}
	time.Sleep(3 * time.Second) // time for the signer, had it been approved
	csr, _ := c.client.CertificatesV1().CertificateSigningRequests().Get(ctx, "k1m-takeover", metav1.GetOptions{})
	if len(csr.Status.Certificate) != 0 {
		t.Fatal("a certificate for the existing node k1m-node-1 was issued to a token holder")
	}
}

func (c *cluster) k1mToken(t *testing.T, args ...string) (string, error) {
	t.Helper()
	all := append([]string{"token"}, args...)
	all = append(all, "--data-dir", filepath.Join(c.dataRoot, "server"))
	out, err := exec.Command(c.k1m, all...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("%v: %s", err, ee.Stderr)
	}
	return string(out), err
}

// joins tells whether the join with token gets through (the real agent
// path: CA pinned, then the token sent).
func joins(ctx context.Context, token pki.Token) error {
	_, err := join.Discover(ctx, serverURL, token)
	return err
}

func testTokenLifecycle(ctx context.Context, t *testing.T, c *cluster) {
	// join.Discover's own words; the agent adds the flag (--token).
	const refused = "token: the server refused the token (401 Unauthorized)"
	created := func(args ...string) pki.Token {
		out, err := c.k1mToken(t, append([]string{"create"}, args...)...)
		if err != nil {
			t.Fatalf("k1m token create %v: %v", args, err)
		}
		token, err := pki.ParseToken(out)
		if err != nil {
			t.Fatalf("k1m token create printed %q: %v", out, err)
		}
		return token
	}
	// The short token last, so that its 8 s (7 to 8: the expiry has whole
	// seconds) are not spent creating the other. kube-apiserver reads
	// token Secrets from an informer, which may see a new one a moment
	// after its create returns: a fresh token gets a few seconds to join.
	daily := created("--description", "for rack 7")
	short := created("--ttl", "8s", "--description", "short-lived")
	for _, tok := range []pki.Token{short, daily} {
		testutil.Eventually(t, 5*time.Second, "the fresh token "+tok.TokenID()+" joins", func() error { return joins(ctx, tok) })
	}
	list, err := c.k1mToken(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{daily.TokenID(), "for rack 7", short.TokenID(), "short-lived", c.serverToken(t).TokenID(), join.ServerTokenDescription} {
		if !strings.Contains(list, want) {
			t.Errorf("k1m token list lacks %q:\n%s", want, list)
		}
	}
	// kube-apiserver caches a successful token authentication for 10 s:
	// a deleted or expired token stops joining within that.
	refusedSoon := func(what string, tok pki.Token) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, what+" refused", func() error {
			if err := joins(ctx, tok); err == nil || !strings.Contains(err.Error(), refused) {
				return fmt.Errorf("still joins (%v)", err)
			}
			return nil
		})
	}
	if _, err := c.k1mToken(t, "delete", daily.TokenID()); err != nil {
		t.Fatal(err)
	}
	refusedSoon("the deleted token", daily)
	refusedSoon("the 8 s token, expired", short)
	old := c.serverToken(t)
	if out, err := c.k1mToken(t, "rotate"); err != nil {
		t.Fatalf("k1m token rotate: %v\n%s", err, out)
	}
	rotated := c.serverToken(t)
	if rotated.TokenID() == old.TokenID() {
		t.Fatal("rotate left DATA-DIR/token as it was")
	}
	refusedSoon("the rotated-out server token", old)
	if err := joins(ctx, rotated); err != nil {
		t.Errorf("the new server token does not join: %v", err)
	}
	// Bad input, named.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--ttl", "-5s"}, "--ttl -5s: want 0 (never expires) or a positive duration, e.g. 24h"},
		{[]string{"create", "--ttl", "soon"}, `invalid argument "soon" for "--ttl" flag`},
		{[]string{"delete", "ABC"}, `token ID "ABC": want ` + join.TokenIDForm},
		{[]string{"delete", "zzzzzz"}, "token zzzzzz: no such token"},
	} {
		if _, err := c.k1mToken(t, bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("k1m token %v: %v, want %q", bad.args, err, bad.want)
		}
	}
}

// testAgentRestartWithoutToken restarts an agent with no token at all:
// it must come back on its own certificate, and no node keeps a join
// credential on disk.
func testAgentRestartWithoutToken(ctx context.Context, t *testing.T, c *cluster) {
	boots, _ := filepath.Glob(filepath.Join(c.dataRoot, "*", "*", "bootstrap.kubeconfig"))
	more, _ := filepath.Glob(filepath.Join(c.dataRoot, "server", "agent", "bootstrap.kubeconfig"))
	if boots = append(boots, more...); len(boots) > 0 {
		t.Errorf("join credentials left on disk after the join: %v", boots)
	}
	restarted := time.Now()
	must(t, "restart-agent", c.harness(t).RestartAgent(ctx, 1))
	testutil.Eventually(t, 2*time.Minute, "k1m-node-1 back on its own certificate", func() error {
		log, _ := os.ReadFile(filepath.Join(c.clusterDir, "k1m-node-1.log"))
		if n := strings.Count(string(log), "k1m agent: node k1m-node-1 starts on its own client certificate"); n != 1 {
			return fmt.Errorf("%d restarts on its own certificate in the log", n)
		}
		lease, err := c.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "k1m-node-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(restarted) {
			return fmt.Errorf("lease not renewed since the restart")
		}
		return nil
	})
}

// httpsGet fetches url presenting cert (nil: none) and trusting caFile.
func httpsGet(t *testing.T, url, caFile string, cert *tls.Certificate) (int, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func loadPair(t *testing.T, cert, key string) *tls.Certificate {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// testEtcdsRefuseOthers presents to each etcd a node's client certificate
// (what anyone gets through the CSR API), no certificate, and kube-
// apiserver's etcd client certificate (the positive control).
func testEtcdsRefuseOthers(t *testing.T, c *cluster) {
	nodeCert := filepath.Join(c.nodeDir("k1m-node-1"), "kubelet-pki", "kubelet-client-current.pem")
	etcdCA := c.tlsFile("etcd-ca.crt")
	for _, port := range []int{2379, 2381} {
		url := fmt.Sprintf("https://[::1]:%d/version", port)
		if code, err := httpsGet(t, url, etcdCA, loadPair(t, c.tlsFile("apiserver-etcd-client.crt"), c.tlsFile("apiserver-etcd-client.key"))); err != nil || code != http.StatusOK {
			t.Errorf("etcd :%d with kube-apiserver's client certificate: %d, %v", port, code, err)
		}
		for name, cert := range map[string]*tls.Certificate{"a node certificate from the CSR API": loadPair(t, nodeCert, nodeCert), "no certificate": nil} {
			if code, err := httpsGet(t, url, etcdCA, cert); err == nil {
				t.Errorf("etcd :%d accepted %s (HTTP %d)", port, name, code)
			}
		}
	}
}

// testEtcdSockets: the server's etcds serve its kube-apiserver on unix
// sockets without TLS (docs/security.md); root reaches etcd there with no
// certificate, any other user is refused by the sockets' directory (the
// directories above it opened to all for the check, so that only it can
// refuse).
func testEtcdSockets(t *testing.T, c *cluster) {
	serverDir := filepath.Join(c.dataRoot, "server")
	dir := server.EtcdSocketDir(serverDir)
	log, err := os.ReadFile(filepath.Join(c.clusterDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "k1m server: kube-apiserver reaches its etcds over unix sockets in " + dir + ", without TLS"; !strings.Contains(string(log), want) {
		t.Errorf("the server's log does not say %q", want)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 || info.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("%s: %v (%v), want mode 0700, root's", dir, info.Mode(), err)
	}
	for _, d := range []string{c.dataRoot, serverDir} {
		info, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
		defer os.Chmod(d, info.Mode().Perm())
	}
	for _, name := range []string{"durable.sock", "no-fsync.sock"} {
		path := filepath.Join(dir, name)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", path)
			}}}
		resp, err := client.Get("http://etcd/version")
		if err != nil {
			t.Errorf("%s as root: %v", name, err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
			t.Errorf("%s as root: HTTP %d", name, resp.StatusCode)
		}
		if err := testutil.DialUnixAsNobody(path); !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s as nobody: %v, want permission denied", name, err)
		}
	}
}

// testReadinessEndpoint: the server's readiness endpoint answers a
// node's certificate with 200 "ok", and refuses in the handshake a
// client without a certificate, or with one of another CA (the etcd
// CA's: kube-apiserver's etcd client).
func testReadinessEndpoint(t *testing.T, c *cluster) {
	url := fmt.Sprintf("https://[fddf:4035:b520::1]:%d%s", constants.ServerReadyPort, readiness.Path)
	nodeCert := filepath.Join(c.nodeDir("k1m-node-1"), "kubelet-pki", "kubelet-client-current.pem")
	requireReadyz(t, url, c.tlsFile("ca.crt"), loadPair(t, nodeCert, nodeCert))
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil,
		"another CA's certificate": loadPair(t, c.tlsFile("apiserver-etcd-client.crt"), c.tlsFile("apiserver-etcd-client.key"))} {
		if code, err := httpsGet(t, url, c.tlsFile("ca.crt"), cert); err == nil {
			t.Errorf("readiness answered %s (HTTP %d), want the handshake refused", name, code)
		}
	}
}

// requireReadyz wants url to answer 200 "ok" to cert within a minute (a
// server that just started probes its stores first).
func requireReadyz(t *testing.T, url, caFile string, cert *tls.Certificate) {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{*cert}}}}
	testutil.Eventually(t, time.Minute, url+" ready", func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			return fmt.Errorf("HTTP %d %q, want 200 \"ok\"", resp.StatusCode, body)
		}
		return nil
	})
}

// testKubeletTLS reaches an agent's kubelet trusting only the cluster CA
// (its serving certificate must be the cluster's, for its own address):
// anonymous is refused, kube-apiserver's kubelet client is served.
func testKubeletTLS(t *testing.T, c *cluster) {
	url := "https://[fddf:4035:b520::11]:10250/pods"
	code, err := httpsGet(t, url, c.tlsFile(constants.KubeletServingCA+".crt"), nil)
	if err != nil {
		t.Fatalf("the kubelet's serving certificate does not verify against the kubelet serving CA: %v", err)
	}
	if code != http.StatusUnauthorized {
		t.Errorf("anonymous request to the kubelet: HTTP %d, want 401", code)
	}
	if code, err := httpsGet(t, url, c.tlsFile(constants.KubeletServingCA+".crt"), loadPair(t, c.tlsFile("apiserver-kubelet-client.crt"), c.tlsFile("apiserver-kubelet-client.key"))); err != nil || code != http.StatusOK {
		t.Errorf("kube-apiserver's kubelet client: HTTP %d, %v", code, err)
	}
	// Through kube-apiserver, which now verifies each kubelet: logs from
	// the web pods on both agents (exec is used by the other checks).
	if out, err := c.kubectl("logs", "-n", testNamespace, "-l", "app=web", "--prefix", "--tail=1"); err != nil {
		t.Errorf("kubectl logs through verified kubelets: %v: %s", err, out)
	}
}

// listener is one row of docs/security.md's table, or one live socket.
type listener struct{ role, addr, port string }

func documentedListeners(t *testing.T, root string) []listener {
	data, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "<!-- listeners:")
	table, _, ok2 := strings.Cut(table, "<!-- end listeners -->")
	if !ok || !ok2 {
		t.Fatal("docs/security.md has no listener table between its markers")
	}
	var rows []listener
	for _, line := range strings.Split(table, "\n")[3:] {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		addr := strings.Trim(strings.Fields(cells[2])[0], "`")
		port := strings.Fields(cells[3])[0]
		rows = append(rows, listener{strings.TrimSpace(cells[1]), addr, port})
	}
	return rows
}

// liveListeners lists the TCP listeners of k1m and containerd processes
// in a network namespace ("" for the host's).
func liveListeners(t *testing.T, netns string) []listener {
	args := []string{"ss", "-ltnpH"}
	if netns != "" {
		args = append([]string{"nsenter", "--net=/run/netns/" + netns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var live []listener
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !(strings.Contains(f[5], `"k1m"`) || strings.Contains(f[5], `"containerd"`)) {
			continue
		}
		host, port, _ := net.SplitHostPort(f[3])
		if host == "*" {
			host = "::"
		}
		live = append(live, listener{addr: host, port: port})
	}
	return live
}

func (l listener) matches(row listener) bool {
	return l.addr == row.addr && (l.port == row.port || row.port == "random")
}

// testListeners compares every socket k1m opens with docs/security.md,
// both ways, on the server and on an agent.
func testListeners(t *testing.T, c *cluster) {
	rows := documentedListeners(t, c.root)
	for _, m := range []struct{ netns, role string }{{"", "server"}, {"k1m-node-1", "agent"}} {
		var want []listener
		for _, r := range rows {
			if r.role == "every node" || r.role == m.role {
				want = append(want, r)
			}
		}
		live := liveListeners(t, m.netns)
		for _, l := range live {
			if !slices.ContainsFunc(want, l.matches) {
				t.Errorf("%s listens on [%s]:%s, which docs/security.md does not list", m.role, l.addr, l.port)
			}
			if ip := net.ParseIP(l.addr); !ip.IsLoopback() && l.port != "6443" && l.port != "10250" && l.port != strconv.Itoa(constants.ServerReadyPort) {
				t.Errorf("%s listens beyond loopback on [%s]:%s: only kube-apiserver, the server's readiness and the kubelet may", m.role, l.addr, l.port)
			}
		}
		for _, r := range want {
			if !slices.ContainsFunc(live, func(l listener) bool { return l.matches(r) }) {
				t.Errorf("docs/security.md lists [%s]:%s on %s, which does not listen there", r.addr, r.port, m.role)
			}
		}
	}
}

// testSecretsAtRest writes a Secret and reads its raw value from the
// durable etcd, then finds the write in the audit log.
func testSecretsAtRest(ctx context.Context, t *testing.T, c *cluster) {
	const canary = "k1m-plaintext-canary-0451"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "at-rest", Namespace: testNamespace}, StringData: map[string]string{"password": canary}}
	if _, err := c.client.CoreV1().Secrets(testNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := etcdClient(t, filepath.Join(c.dataRoot, "server", "tls"), 2379).Get(ctx, "/registry/secrets/"+testNamespace+"/at-rest")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw Secret from etcd: %v (%d keys)", err, len(resp.Kvs))
	}
	raw := string(resp.Kvs[0].Value)
	dataDir := filepath.Join(c.dataRoot, "server")
	keys, err := secretsenc.LoadKeySet(server.SecretsKeySetFile(dataDir), server.SecretsKeyFile(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if want := secretsenc.PrefixOf(keys.Write); keys.Empty() || !strings.HasPrefix(raw, want) {
		t.Errorf("the stored Secret starts %q, want %q", raw[:min(len(raw), 40)], want)
	}
	if strings.Contains(raw, canary) {
		t.Error("the stored Secret holds its value in plaintext")
	}
	testutil.Eventually(t, 30*time.Second, "the Secret's creation in the audit log", func() error {
		f, err := os.Open(c.auditLog())
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Verb      string `json:"verb"`
				Level     string `json:"level"`
				User      struct{ Username string }
				ObjectRef struct{ Resource, Namespace, Name string }
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Verb == "create" && ev.ObjectRef.Resource == "secrets" && ev.ObjectRef.Name == "at-rest" {
				if ev.Level != "Metadata" || ev.User.Username != "k1m-admin" || strings.Contains(sc.Text(), canary) {
					return fmt.Errorf("audit event %s", sc.Text())
				}
				return nil
			}
		}
		return fmt.Errorf("not there yet")
	})
}

// testPassThrough checks one pass-through flag of the kubelet and one of
// kube-apiserver, each by its effect through the API.
func testPassThrough(ctx context.Context, t *testing.T, c *cluster) {
	server := serverNodeName(ctx, t, c, []string{"k1m-node-1", "k1m-node-2"})
	n, err := c.client.CoreV1().Nodes().Get(ctx, server, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pods := n.Status.Capacity.Pods().Value(); pods != passThroughMaxPods {
		t.Errorf("--kubelet-arg=max-pods=%d: the server's node has capacity for %d pods", passThroughMaxPods, pods)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pass-through", Namespace: testNamespace},
		Spec: corev1.PodSpec{NodeName: "nowhere", Containers: []corev1.Container{{Name: "c", Image: busybox}}}}
	created, err := c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.client.CoreV1().Pods(testNamespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	var got int64 = -1
	for _, tol := range created.Spec.Tolerations {
		if tol.Key == corev1.TaintNodeNotReady && tol.TolerationSeconds != nil {
			got = *tol.TolerationSeconds
		}
	}
	if got != passThroughTolerance {
		t.Errorf("--kube-apiserver-arg=default-not-ready-toleration-seconds=%d: a new pod tolerates not-ready for %d s", passThroughTolerance, got)
	}
}

// testServingCertificateAttack is the attack of a node that puts the API
// server's name and the kubernetes Service IP in its own status, then asks
// for a serving certificate with them, with its own credentials: the
// status write goes through (a node writes its own status) and the
// request is denied, naming why. And a real kubelet serving certificate,
// presented as the API server to a client that trusts what an agent (its
// DATA-DIR/ca.crt) or a pod (kube-root-ca.crt) trusts, is refused.
func testServingCertificateAttack(ctx context.Context, t *testing.T, c *cluster) {
	const node, serviceIP, apiName = "k1m-node-1", "fddf:4035:b510::1", "kubernetes.default.svc"
	nodeCert := filepath.Join(c.nodeDir(node), "kubelet-pki", "kubelet-client-current.pem")
	asNode := c.clientWithCertificate(nodeCert)
	patch := fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalDNS","address":%q},{"type":"ExternalIP","address":%q}]}}`, apiName, serviceIP)
	if _, err := asNode.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the node could not write its own status (the attack's first step): %v", err)
	}
	csr := servingCSR(t, "k1m-serving-attack", node, []string{apiName}, []net.IP{net.ParseIP(serviceIP)})
	if _, err := asNode.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the node may ask for serving certificates: %v", err)
	}
	defer c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{})
	want := "IP " + serviceIP + " is in the service range fddf:4035:b510::/108 (the kubernetes Service and every ClusterIP): a kubelet serving certificate may name only the node's own addresses"
	testutil.Eventually(t, time.Minute, "the attack's CSR decided", func() error {
		got, err := c.client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type != certv1.CertificateDenied || cond.Reason != approver.ReasonControlPlane || cond.Message != want {
				t.Fatalf("the attack's CSR: %s %s (%s), want Denied %s (%s)", cond.Type, cond.Reason, cond.Message, approver.ReasonControlPlane, want)
			}
			return nil
		}
		return fmt.Errorf("still pending")
	})
	time.Sleep(3 * time.Second) // time for the signer, had it been approved
	if got, _ := c.client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{}); len(got.Status.Certificate) != 0 {
		t.Fatal("a serving certificate for the API server's name was issued to a node")
	}

	// The second line: whatever a kubelet serving certificate names, no
	// agent or pod takes it for the API server.
	rootCA, err := c.client.CoreV1().ConfigMaps(testNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agentCA, err := os.ReadFile(filepath.Join(c.nodeDir(node), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	servingCA, _ := os.ReadFile(c.tlsFile(constants.KubeletServingCA + ".crt"))
	kubeletPair := filepath.Join(c.nodeDir(node), "kubelet-pki", "kubelet-server-current.pem")
	for _, trust := range []struct {
		who    string
		caPEM  []byte
		accept bool
	}{{"a pod (kube-root-ca.crt)", []byte(rootCA.Data["ca.crt"]), false}, {"an agent (its ca.crt)", agentCA, false}, {"kube-apiserver (the kubelet serving CA)", servingCA, true}} {
		err := handshakeAsAPIServer(t, loadPair(t, kubeletPair, kubeletPair), trust.caPEM)
		var unknown x509.UnknownAuthorityError
		switch {
		case trust.accept && err != nil:
			t.Errorf("%s refused the kubelet's serving certificate: %v", trust.who, err)
		case !trust.accept && !errors.As(err, &unknown):
			t.Errorf("%s, shown the kubelet's serving certificate as the API server: %v; want x509: certificate signed by unknown authority", trust.who, err)
		}
	}
}

// handshakeAsAPIServer serves pair on loopback and connects to it as a
// client trusting caPEM would, for the certificate's first IP (a name the
// certificate has, so only the issuer can make it fail).
func handshakeAsAPIServer(t *testing.T, pair *tls.Certificate, caPEM []byte) error {
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || len(leaf.IPAddresses) == 0 {
		t.Fatalf("the kubelet's serving certificate: %v, IPs %v", err, leaf.IPAddresses)
	}
	ln, err := tls.Listen("tcp", "[::1]:0", &tls.Config{Certificates: []tls.Certificate{*pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no certificate in the CA bundle")
	}
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: leaf.IPAddresses[0].String()})
	if err == nil {
		conn.Close()
	}
	return err
}

// testAdminRevocable deletes the ClusterRoleBinding the admin certificate's
// rights come from, with the super-admin: the admin kubeconfig is refused
// (403), the super-admin's still works (break-glass); the binding put back,
// the admin works again.
func testAdminRevocable(ctx context.Context, t *testing.T, c *cluster) {
	superCfg, err := testutil.RESTConfig(datadir.Server(c.serverData()).SuperAdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	super := kubernetes.NewForConfigOrDie(superCfg)
	binding, err := super.RbacV1().ClusterRoleBindings().Get(ctx, constants.AdminGroup, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ClusterRoleBinding %s: %v", constants.AdminGroup, err)
	}
	if err := super.RbacV1().ClusterRoleBindings().Delete(ctx, constants.AdminGroup, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		b := binding.DeepCopy()
		b.ResourceVersion, b.UID = "", ""
		if _, err := super.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("putting %s back: %v", constants.AdminGroup, err)
		}
		restored = true
	}
	defer restore()
	testutil.Eventually(t, 30*time.Second, "the admin refused without its binding", func() error {
		_, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("list nodes as the admin: %v, want 403 Forbidden", err)
		}
		return nil
	})
	if _, err := super.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the super-admin (break-glass) without the admin binding: %v", err)
	}
	restore()
	testutil.Eventually(t, 30*time.Second, "the admin allowed again", func() error {
		_, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	})
}
