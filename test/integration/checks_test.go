package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/test/testutil"
)

func testNodes(ctx context.Context, t *testing.T, c *cluster) {
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != nodes {
		t.Fatalf("%d nodes, want %d", len(list.Items), nodes)
	}
	for _, n := range list.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s not Ready", n.Name)
		}
		for _, a := range n.Status.Addresses {
			if ip := net.ParseIP(a.Address); ip != nil && ip.To4() != nil {
				t.Errorf("node %s has an IPv4 address %s", n.Name, a.Address)
			}
		}
		for _, cidr := range n.Spec.PodCIDRs {
			if !strings.HasPrefix(cidr, "fddf:4035:b5") || !strings.HasSuffix(cidr, "/64") {
				t.Errorf("node %s pod range %s, want a /64 of fddf:4035:b500::/44", n.Name, cidr)
			}
		}
		if len(n.Spec.PodCIDRs) != 1 {
			t.Errorf("node %s pod ranges %v, want one IPv6 /64", n.Name, n.Spec.PodCIDRs)
		}
	}
	svc, err := c.client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil || ip.To4() != nil {
		t.Errorf("kubernetes Service IP %s, want IPv6", svc.Spec.ClusterIP)
	}
}

// testLeaseRenewal measures the renew interval from the Leases' renewTime.
func testLeaseRenewal(ctx context.Context, t *testing.T, c *cluster) {
	leases := c.client.CoordinationV1().Leases("kube-node-lease")
	seen := map[string][]time.Time{}
	deadline := time.Now().Add(6*renewInterval + 2*time.Second)
	for time.Now().Before(deadline) {
		list, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list.Items {
			if l.Spec.RenewTime == nil {
				continue
			}
			if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != int32(leaseDuration/time.Second) {
				t.Fatalf("lease %s: leaseDurationSeconds %d, want %d", l.Name, got, int32(leaseDuration/time.Second))
			}
			ts := seen[l.Name]
			if rt := l.Spec.RenewTime.Time; len(ts) == 0 || !rt.Equal(ts[len(ts)-1]) {
				seen[l.Name] = append(ts, rt)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(seen) != nodes {
		t.Fatalf("leases of %d nodes, want %d", len(seen), nodes)
	}
	for name, ts := range seen {
		if len(ts) < 4 {
			t.Errorf("lease %s renewed %d times in %s, want at least 4", name, len(ts), 6*renewInterval)
			continue
		}
		for i := 1; i < len(ts); i++ {
			gap := ts[i].Sub(ts[i-1])
			if gap < renewInterval-time.Second || gap > renewInterval+2*time.Second {
				t.Errorf("lease %s renewed after %s, want about %s (renewTimes %v)", name, gap, renewInterval, ts)
			}
		}
		t.Logf("lease %s: %d renewals, e.g. %s apart", name, len(ts), ts[len(ts)-1].Sub(ts[len(ts)-2]))
	}
}

const testNamespace = "k1m-integration"

func testServiceAcrossNodes(ctx context.Context, t *testing.T, c *cluster) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	agents := []string{"k1m-node-1", "k1m-node-2"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{
						NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
							NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: agents}}}}}},
						PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}},
					},
					Containers: []corev1.Container{{
						Name: "httpd", Image: "k1m.local/busybox:1.35", ImagePullPolicy: corev1.PullNever,
						Command: []string{"sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p [::]:8080 -h /www"},
						Ports:   []corev1.ContainerPort{{ContainerPort: 8080}},
					}},
				},
			},
		},
	}
	if _, err := c.client.AppsV1().Deployments(testNamespace).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNamespace},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	svc, err := c.client.CoreV1().Services(testNamespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: testNamespace},
		Spec: corev1.PodSpec{
			NodeName:   serverNodeName(ctx, t, c, agents),
			Containers: []corev1.Container{{Name: "sh", Image: "k1m.local/busybox:1.35", ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}},
		},
	}
	if _, err := c.client.CoreV1().Pods(testNamespace).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var backends []corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "two web pods running on the two agents and the client running", func() error {
		pods, err := c.client.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		backends = nil
		nodesUsed := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
			}
			if p.Labels["app"] == "web" {
				backends = append(backends, p)
				nodesUsed[p.Spec.NodeName] = true
			}
		}
		if len(backends) != 2 || len(nodesUsed) != 2 {
			return fmt.Errorf("web pods on %v", nodesUsed)
		}
		return nil
	})
	for _, b := range backends {
		if ip := net.ParseIP(b.Status.PodIP); ip == nil || ip.To4() != nil {
			t.Errorf("pod %s IP %q, want IPv6", b.Name, b.Status.PodIP)
		}
		// Pod to pod across nodes, over the routes the agents program.
		testutil.Eventually(t, time.Minute, "client on the server node fetches "+b.Status.PodIP+" port 8080", func() error {
			return c.expectBody(b.Status.PodIP, "8080", b.Name)
		})
	}
	name := "web." + testNamespace + ".svc.cluster.local"
	testutil.Eventually(t, time.Minute, "CoreDNS answers AAAA for "+name, func() error {
		out, err := c.kubectl("exec", "-n", testNamespace, "client", "--", "nslookup", "-type=AAAA", name)
		if err != nil || !strings.Contains(out, svc.Spec.ClusterIP) {
			return fmt.Errorf("want %s in the answer: %v: %s", svc.Spec.ClusterIP, err, out)
		}
		return nil
	})
	served := map[string]bool{}
	testutil.Eventually(t, 2*time.Minute, "the ClusterIP Service, resolved by name, reaches both backends", func() error {
		// busybox's nc does not resolve names (static glibc): resolve with
		// nslookup (CoreDNS, AAAA), then connect to the answer.
		script := `ip=$(nslookup -type=AAAA ` + name + ` | awk '/^Name:/ {n=1} n && /^Address:/ {print $2}' | tail -1); ` +
			`[ -n "$ip" ] || exit 3; printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 "$ip" 80`
		out, err := c.kubectl("exec", "-n", testNamespace, "client", "--", "sh", "-c", script)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		served[lastLine(out)] = true
		if len(served) < 2 || served[""] {
			return fmt.Errorf("served so far by %v", served)
		}
		return nil
	})
}

// expectBody fetches / from [ip]:port in the client pod (busybox nc: its
// wget crashes in Debian's static build) and wants body as the last line.
func (c *cluster) expectBody(ip, port, body string) error {
	return c.expectBodyFrom("client", ip, port, body)
}

// expectBodyFrom is expectBody from the pod named client.
func (c *cluster) expectBodyFrom(client, ip, port, body string) error {
	out, err := c.kubectl("exec", "-n", testNamespace, client, "--", "sh", "-c",
		`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+ip+` `+port)
	if err != nil || lastLine(out) != body {
		return fmt.Errorf("want body %q: %v: %s", body, err, out)
	}
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// serverNodeName is the node that is not one of the agents.
func serverNodeName(ctx context.Context, t *testing.T, c *cluster, agents []string) string {
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if n.Name != agents[0] && n.Name != agents[1] {
			return n.Name
		}
	}
	t.Fatal("no server node")
	return ""
}

// testEtcdSplit looks into both etcds: Events and Leases only in the
// no-fsync one, everything else only in the durable one.
func testEtcdSplit(ctx context.Context, t *testing.T, c *cluster) {
	tlsDir := filepath.Join(c.dataRoot, "server", "tls")
	durable := etcdClient(t, tlsDir, 2379)
	ephemeral := etcdClient(t, tlsDir, 2381)
	count := func(cli *clientv3.Client, prefix string) int64 {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	for _, prefix := range []string{"/registry/leases/kube-node-lease/", "/registry/events/"} {
		if n := count(ephemeral, prefix); n == 0 {
			t.Errorf("no %s keys in the ephemeral etcd", prefix)
		}
		if n := count(durable, prefix); n != 0 {
			t.Errorf("%d %s keys in the durable etcd, want none", n, prefix)
		}
	}
	for _, prefix := range []string{"/registry/configmaps/", "/registry/pods/", "/registry/minions/"} {
		if n := count(durable, prefix); n == 0 {
			t.Errorf("no %s keys in the durable etcd", prefix)
		}
		if n := count(ephemeral, prefix); n != 0 {
			t.Errorf("%d %s keys in the ephemeral etcd, want none", n, prefix)
		}
	}
}

func etcdClient(t *testing.T, tlsDir string, port int) *clientv3.Client {
	cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "apiserver-etcd-client.crt"), filepath.Join(tlsDir, "apiserver-etcd-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(tlsDir, "etcd-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://[::1]:" + strconv.Itoa(port)},
		DialTimeout: 10 * time.Second,
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var tuningLine = regexp.MustCompile(`"Go runtime tuning" result="memory limit (\d+) bytes \(([^)]*)\), GOMEMLIMIT=(\d+), GOGC=(\d+)"`)

// testRuntimeTuning reads what the server process logged at start (patch
// 0002 logs the values it applied) and checks them against the machine,
// then checks that the B-tree watch cache cannot be turned on.
func testRuntimeTuning(t *testing.T, c *cluster) {
	log, err := os.ReadFile(filepath.Join(c.clusterDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := tuningLine.FindSubmatch(log)
	if m == nil {
		t.Fatal("the server logged no Go runtime tuning line")
	}
	limit, _ := strconv.ParseInt(string(m[1]), 10, 64)
	memlimit, _ := strconv.ParseInt(string(m[3]), 10, 64)
	if string(m[4]) != "800" {
		t.Errorf("GOGC=%s, want 800", m[4])
	}
	if want := limit / 10 * 9; memlimit < want-10 || memlimit > want+10 {
		t.Errorf("GOMEMLIMIT=%d, want 90%% of %d", memlimit, limit)
	}
	out, err := exec.Command(c.k1m, "kube-apiserver", "--feature-gates=BtreeWatchCache=true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "BtreeWatchCache to true, feature is locked to false") {
		t.Errorf("kube-apiserver with BtreeWatchCache=true: want a refusal, got %v: %s", err, tail(out))
	}
}

// testBadInput runs the binary with each bad input and wants a non-zero
// exit, an error naming the flag, and nothing written.
func testBadInput(t *testing.T, c *cluster) {
	token, err := os.ReadFile(filepath.Join(c.dataRoot, "server", "token"))
	if err != nil {
		t.Fatal(err)
	}
	good := strings.TrimSpace(string(token))
	hash, secret, _ := strings.Cut(good, "::")
	wrongCA := "K1M" + strings.Repeat("0", 64) + "::" + secret
	wrongSecret := hash + "::abcdef.0123456789abcdef"
	images := filepath.Join(c.root, "_output", "images")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"wrong CA hash in token", []string{"agent", "--server", "https://[fddf:4035:b520::1]:6443", "--token", wrongCA, "--images-dir", images}, "--token: the server's CA"},
		{"wrong token secret", []string{"agent", "--server", "https://[fddf:4035:b520::1]:6443", "--token", wrongSecret, "--images-dir", images}, "--token: the server refused the token"},
		{"malformed token", []string{"agent", "--server", "https://[::1]:6443", "--token", "secret"}, "--token is not of the form"},
		{"unreachable server", []string{"agent", "--server", "https://[::1]:1", "--token", good, "--images-dir", images}, "--server https://[::1]:1: cannot reach kube-apiserver"},
		{"IPv4 cluster range", []string{"server", "--cluster-cidr", "10.42.0.0/16"}, "--cluster-cidr 10.42.0.0/16 is IPv4"},
		{"IPv4 service range", []string{"server", "--service-cidr", "10.43.0.0/16"}, "--service-cidr 10.43.0.0/16 is IPv4"},
		{"renew interval not whole seconds", []string{"server", "--node-lease-renew-interval", "500ms"}, "--node-lease-renew-interval 500ms: want a whole number of seconds"},
		{"unwritable data dir", []string{"server", "--data-dir", "/proc/k1m", "--disable-agent"}, "--data-dir /proc/k1m: cannot create it"},
		{"port in use", []string{"server", "--disable-agent"}, "--https-listen-port 6443: port in use"},
		{"pass-through flag k1m owns", []string{"server", "--kube-apiserver-arg", "etcd-servers=https://[::1]:1"}, "collides with --etcd-servers, which k1m sets for kube-apiserver itself: k1m runs the durable etcd"},
		{"pass-through syntax", []string{"agent", "--server", "https://[::1]:6443", "--kubelet-arg", "max-pods"}, "want name=value, the component's flag name without dashes"},
		{"never joined, no token", []string{"agent", "--server", "https://[::1]:6443", "--images-dir", images}, "--token is empty, and node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			args := tc.args
			if !contains(args, "--data-dir") {
				flag := "--data-dir"
				if args[0] == "server" {
					args = append(args, flag, dataDir)
				} else {
					args = append(args, flag, dataDir, "--run-dir", filepath.Join(t.TempDir(), "run"))
				}
			}
			out, err := exec.Command(c.k1m, args...).CombinedOutput()
			if err == nil {
				t.Fatalf("k1m %s succeeded, want a failure", strings.Join(args, " "))
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("k1m %s: want %q in the error, got:\n%s", strings.Join(args, " "), tc.want, tail(out))
			}
			if strings.Contains(string(out), secret) && tc.name != "malformed token" {
				t.Errorf("the output shows the token secret")
			}
			if files := listFiles(dataDir); len(files) > 0 {
				t.Errorf("a failed start left files behind: %v", files)
			}
		})
	}
	// The token's secret half is in no log.
	logs, _ := filepath.Glob(filepath.Join(c.clusterDir, "*.log"))
	for _, l := range logs {
		if data, _ := os.ReadFile(l); strings.Contains(string(data), strings.SplitN(secret, ".", 2)[1]) {
			t.Errorf("%s shows the token secret", l)
		}
	}
	// Renew interval not shorter than the lease: the kubelet and the
	// controller-manager refuse it (patch 0003).
	for _, args := range [][]string{
		{"kubelet", "--node-lease-renew-interval=60s"},
		{"kube-controller-manager", "--node-lease-duration=40s", "--node-monitor-grace-period=30s"},
	} {
		out, err := exec.Command(c.k1m, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "node-lease") {
			t.Errorf("k1m %s: want a refusal naming the lease setting, got %v: %s", strings.Join(args, " "), err, tail(out))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func listFiles(dir string) []string {
	var files []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files
}

func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}
