package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/podnet"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
)

// leaseSamples are the node Leases' renewTimes seen over a window, each
// Lease's distinct ones in order, or why sampling stopped.
type leaseSamples struct {
	done chan struct{}
	seen map[string][]time.Time
	err  error
}

// sampleLeases reads every node Lease twice a second for six renew
// intervals, in the background: the subtests that run meanwhile leave the
// agents running, and the window costs the test no time of its own. It
// reads as the super-admin: Security revokes the admin's binding meanwhile.
func sampleLeases(ctx context.Context, c *cluster) *leaseSamples {
	s := &leaseSamples{done: make(chan struct{}), seen: map[string][]time.Time{}}
	cfg, err := testutil.RESTConfig(datadir.Server(c.serverData()).SuperAdminKubeconfig())
	if err != nil {
		s.err = err
		close(s.done)
		return s
	}
	leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases("kube-node-lease")
	go func() {
		defer close(s.done)
		deadline := time.Now().Add(6*renewInterval + 2*time.Second)
		for time.Now().Before(deadline) {
			list, err := leases.List(ctx, metav1.ListOptions{})
			if err != nil {
				s.err = err
				return
			}
			for _, l := range list.Items {
				if l.Spec.RenewTime == nil {
					continue
				}
				if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != int32(leaseDuration/time.Second) {
					s.err = fmt.Errorf("lease %s: leaseDurationSeconds %d, want %d", l.Name, got, int32(leaseDuration/time.Second))
					return
				}
				ts := s.seen[l.Name]
				if rt := l.Spec.RenewTime.Time; len(ts) == 0 || !rt.Equal(ts[len(ts)-1]) {
					s.seen[l.Name] = append(ts, rt)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	return s
}

// testLeaseRenewal checks the renew interval from the Leases' renewTimes
// sampleLeases saw (waiting for its window to end).
func testLeaseRenewal(t *testing.T, s *leaseSamples) {
	<-s.done
	if s.err != nil {
		t.Fatalf("sampling the node Leases: %v", s.err)
	}
	if len(s.seen) != nodes {
		t.Fatalf("leases of %d nodes, want %d", len(s.seen), nodes)
	}
	for name, ts := range s.seen {
		if len(ts) < 4 {
			t.Errorf("lease %s renewed %d times in %s, want at least 4", name, len(ts), 6*renewInterval)
			continue
		}
		// The median gap: the kubelet waits its interval after an update
		// returns, so one slow update on a busy machine makes one long gap.
		// None may reach the grace period, slow or not.
		var gaps []time.Duration
		for i := 1; i < len(ts); i++ {
			gaps = append(gaps, ts[i].Sub(ts[i-1]))
		}
		median, longest := medianAndMax(gaps)
		if median < renewInterval-500*time.Millisecond || median > renewInterval+500*time.Millisecond || longest >= leaseDuration {
			t.Errorf("lease %s renewed every %s (median; longest gap %s), want about %s and every gap under %s (renewTimes %v)", name, median, longest, renewInterval, leaseDuration, ts)
			continue
		}
		t.Logf("lease %s: %d renewals, every %s (median; longest gap %s)", name, len(ts), median.Round(time.Millisecond), longest.Round(time.Millisecond))
	}
}

const testNamespace = "k1m-integration"

// agents are the nodes the harness (test/localcluster) starts next to the server's own.
var agents = []string{"k1m-node-1", "k1m-node-2"}

func (c *cluster) Client() kubernetes.Interface { return c.client }

func (c *cluster) Kubectl(args ...string) (string, error) { return c.kubectl(args...) }

// CountKeys reads the server's etcds directly, with kube-apiserver's
// etcd client certificate.
func (c *cluster) CountKeys(ctx context.Context, store clustercheck.Store, prefix string) (int64, error) {
	port := map[clustercheck.Store]int{clustercheck.Durable: 2379, clustercheck.NoFsync: 2381}[store]
	resp, err := etcdClient(c.t, filepath.Join(c.dataRoot, "server", "tls"), port).Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// testServiceAcrossNodes: web pods on both agents, the client on the
// server's node (clustercheck.ServiceAcrossNodes).
func testServiceAcrossNodes(ctx context.Context, t *testing.T, c *cluster) {
	clustercheck.ServiceAcrossNodes(ctx, t, c, clustercheck.Layout{Namespace: testNamespace, Image: busybox,
		ClientNode: serverNodeName(ctx, t, c, agents), BackendNodes: agents})
}

// busybox is the test image make images builds; nodes import it.
const busybox = "k1m.local/busybox:1.35"

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

// testNodeWatches wants kube-apiserver to hold 7 watches of every Node
// (requireEveryNodeWatches): its own, kube-controller-manager's,
// kube-scheduler's, the route publisher's, the approver's (whose serving
// decisions check every Node's addresses), metrics-server's (one replica,
// which scrapes every node) and this test's NotReady monitor
// (TestCluster's watchNotReady); the audit log shows these seven users
// and no node. Every node's pod network used to add one (each Node
// status report then reached every node: 5 such watches with 2 nodes, 8
// with 5, measured before the routes were published). The pod routes the
// nodes follow are published, one per node.
func testNodeWatches(ctx context.Context, t *testing.T, c *cluster) {
	requireEveryNodeWatches(ctx, t, []kubernetes.Interface{c.client}, nodes, 7)
	routes, err := c.client.CoreV1().ConfigMaps(podnet.RoutesNamespace).List(ctx, metav1.ListOptions{LabelSelector: podnet.RouteLabel})
	if err != nil || len(routes.Items) != nodes {
		t.Errorf("%s holds %d routes (%v), want one per node (%d)", podnet.RoutesNamespace, len(routes.Items), err, nodes)
	}
}
