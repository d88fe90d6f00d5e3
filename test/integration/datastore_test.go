package integration

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/podnet"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/localcluster"
	"k1m.dev/k1m/test/localcluster/network"
)

// externalEtcd is an etcd the operator keeps (here: run by the test on
// the host, with a CA of its own), reached from the servers' namespaces
// over the bridge.
type externalEtcd struct {
	endpoint string
	tls      etcd.TLS // the client TLS the servers are given
	client   *clientv3.Client
	// dir, bridge and serverTLS make another etcd of the same operator.
	dir       string
	bridge    net.IP
	serverTLS etcd.TLS
}

func startExternalEtcd(ctx context.Context, t *testing.T, dir string, bridge net.IP) *externalEtcd {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(dir, "datastore-ca", "operator-etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.LoadOrIssue(dir, pki.Leaf{Name: "etcd-server", CommonName: "operator-etcd", Server: true, Client: true,
		IPs: []net.IP{bridge, net.IPv6loopback}})
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := ca.LoadOrIssue(dir, pki.Leaf{Name: "k1m-client", CommonName: "k1m", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "datastore-ca.crt")
	e := &externalEtcd{dir: dir, bridge: bridge, serverTLS: etcd.TLS{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile},
		tls: etcd.TLS{CertFile: cliCert, KeyFile: cliKey, CAFile: caFile}}
	e.start(ctx, t, "operator-etcd", filepath.Join(dir, "data"))
	return e
}

// another starts a second etcd of the same operator (its CA and
// certificates), with a data directory and ports of its own.
func (e *externalEtcd) another(ctx context.Context, t *testing.T, name string) *externalEtcd {
	t.Helper()
	other := &externalEtcd{dir: e.dir, bridge: e.bridge, serverTLS: e.serverTLS, tls: e.tls}
	other.start(ctx, t, name, filepath.Join(e.dir, name))
	return other
}

func (e *externalEtcd) start(ctx context.Context, t *testing.T, name, dataDir string) {
	t.Helper()
	port := freeHostPortPair(t)
	// Listening on every address: the bridge has none until the cluster
	// is up, and the servers start after this.
	r, err := etcd.Start(ctx, etcd.Member{Name: name, DataDir: dataDir, Host: "::", Port: port, TLS: e.serverTLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	cli, err := etcd.NewClient([]string{"https://[::1]:" + strconv.Itoa(port)}, e.tls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	e.endpoint, e.client = "https://"+net.JoinHostPort(e.bridge.String(), strconv.Itoa(port)), cli
}

func (e *externalEtcd) flags() []string {
	return []string{"--datastore-endpoint=" + e.endpoint, "--datastore-cafile=" + e.tls.CAFile,
		"--datastore-certfile=" + e.tls.CertFile, "--datastore-keyfile=" + e.tls.KeyFile}
}

func (e *externalEtcd) keys(ctx context.Context, t *testing.T, prefix string) int64 {
	t.Helper()
	resp, err := e.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("reading %s in the external etcd: %v", prefix, err)
	}
	return resp.Count
}

// freeHostPortPair is a port whose next port is free too (etcd's peer).
func freeHostPortPair(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "[::]:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if l2, err := net.Listen("tcp", net.JoinHostPort("::", strconv.Itoa(port+1))); err == nil {
			l2.Close()
			return port
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// TestExternalDatastore runs three servers whose durable store is an
// external etcd (--datastore-endpoint) and whose no-fsync store spans
// their embedded etcds: the objects land in the external etcd, Leases do
// not, neither server runs a durable member; a joined server restarts;
// a second cluster on the same etcd, a join without the datastore and a
// snapshot of it are refused. Its pod ranges are the provider's to route
// (--pod-routes=provider; the harness's host routes them): no node
// installs a route and pods reach each other across nodes all the same;
// a join with k1m's pod routes is refused.
func TestExternalDatastore(t *testing.T) {
	root, clusterDir, dataRoot := clusterPaths(t, "integration-datastore")
	k1m := filepath.Join(root, "_output", "bin", "k1m")
	// Three: the no-fsync raft group of two loses its quorum when one
	// restarts (docs/ha.md).
	opts := localcluster.Options{Servers: 3, Nodes: 3, K1M: k1m, ClusterDir: clusterDir, DataRoot: dataRoot,
		ImagesDir: filepath.Join(root, "_output", "images"), PodRoutes: constants.PodRoutesProvider}
	probe, err := localcluster.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	bridge := net.IP(probe.Plan().Bridge.Addr.Addr().AsSlice())
	ctx, cancel := testutil.Budget(t, 5*time.Minute)
	defer cancel()
	// Its own directory, outside dataRoot: tearDown (deferred) takes the
	// servers down and removes dataRoot while this etcd still runs (it
	// stops in a t.Cleanup, after the defers), and etcd exits the test
	// binary when its data directory goes from under it. t.TempDir is
	// removed after that stop.
	ext := startExternalEtcd(ctx, t, t.TempDir(), bridge)
	// Pods in a partition of their own: another external etcd.
	podsExt := ext.another(ctx, t, "operator-etcd-pods")
	// One CoreDNS replica per node: three, one more than at the start.
	// No local storage: --disable leaves a packaged component out.
	opts.ServerArgs = append(ext.flags(), "--etcd-partitions=pods", "--datastore-partition-endpoint=pods="+podsExt.endpoint,
		"--dns-nodes-per-replica=1", "--disable="+constants.ComponentLocalStorage)
	h, err := localcluster.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tearDown(t, h, clusterDir, dataRoot)
	must(t, "up", h.Up(ctx))
	clients := make([]kubernetes.Interface, 3)
	for i := range clients {
		cfg, err := testutil.RESTConfig(h.Server(i + 1).AdminKubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = kubernetes.NewForConfigOrDie(cfg)
	}
	t.Run("ObjectsInTheExternalEtcdLeasesNot", func(t *testing.T) {
		requireNodesReady(ctx, t, clients[0], 3)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-the-operators-etcd"}, Data: map[string]string{"k": "v"}}
		if _, err := clients[1].CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if n := ext.keys(ctx, t, "/registry/configmaps/default/"+cm.Name); n != 1 {
			t.Errorf("the ConfigMap written through server 2: %d keys in the external etcd, want 1", n)
		}
		// Through server 1: the no-fsync store spans both servers.
		testutil.Eventually(t, time.Minute, "server 2's node Lease through server 1", func() error {
			_, err := clients[0].CoordinationV1().Leases("kube-node-lease").Get(ctx, h.Server(2).Name, metav1.GetOptions{})
			return err
		})
		if n := ext.keys(ctx, t, "/registry/leases/"); n != 0 {
			t.Errorf("%d Leases in the external etcd, want 0 (they live in the servers' no-fsync etcd)", n)
		}
	})
	t.Run("PodsInTheirOwnExternalEtcd", func(t *testing.T) {
		// CoreDNS's and metrics-server's pods, at least.
		if inPartition, inDurable := podsExt.keys(ctx, t, "/registry/pods/"), ext.keys(ctx, t, "/registry/pods/"); inPartition == 0 || inDurable != 0 {
			t.Errorf("/registry/pods/: %d keys in the pods partition's etcd, %d in the durable one; want all in the partition's", inPartition, inDurable)
		}
		if got, ok, err := etcd.ReadLayout(ctx, ext.client); err != nil || !ok || !reflect.DeepEqual(got, etcd.Layout{Partitions: []string{"pods"}}) {
			t.Errorf("the layout the external durable etcd records: %+v, %v, %v; want pods", got, ok, err)
		}
	})
	t.Run("CoreDNSFollowsTheNodeCount", func(t *testing.T) { testCoreDNSFollowsNodes(ctx, t, clients[0], 3) })
	t.Run("DisabledLocalStorageLeftOut", func(t *testing.T) { testLocalStorageLeftOut(ctx, t, clients[0]) })
	// TestMultiServer's 10 less the route publisher, which provider mode
	// does not run: each server's kube-apiserver and kube-scheduler, the
	// leading controller-manager and approver, metrics-server. A watch of
	// every Node per node would add 3.
	t.Run("NoWatchOfEveryNodePerNodeWithoutRoutes", func(t *testing.T) {
		requireEveryNodeWatches(ctx, t, clients, 3, 9)
	})
	t.Run("ProviderRoutedPodNetwork", func(t *testing.T) { testProviderRoutes(ctx, t, h, clients[0], k1m) })
	t.Run("NoDurableMemberAndTheClaim", func(t *testing.T) {
		caPEM, err := os.ReadFile(filepath.Join(server.TLSDir(h.Server(1).DataDir), "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		hash, _ := pki.CAHash(caPEM)
		for _, e := range []*externalEtcd{ext, podsExt} {
			resp, err := e.client.Get(ctx, etcd.ClusterKey)
			if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != hash {
				t.Errorf("%s in the external etcd at %s: %v %v, want %s", etcd.ClusterKey, e.endpoint, resp, err, hash)
			}
		}
		want := server.DatastoreRecord{Datastore: join.Datastore{Durable: []string{ext.endpoint}, Partitions: map[string][]string{"pods": {podsExt.endpoint}}}, TLS: ext.tls}
		for i := 1; i <= 3; i++ {
			dir := h.Server(i).DataDir
			if etcd.HasData(filepath.Join(dir, "etcd")) {
				t.Errorf("server %d has a durable etcd member", i)
			}
			if got, err := server.ReadDatastore(dir); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("server %d's %s: %+v, %v; want %+v", i, server.DatastoreFile(dir), got, err, want)
			}
		}
	})
	t.Run("JoinedServerRestarts", func(t *testing.T) {
		must(t, "restart-server 2", h.RestartServer(ctx, 2))
		testutil.Eventually(t, 3*time.Minute, "server 2 serving after its restart", func() error {
			_, err := clients[1].CoreV1().ConfigMaps("default").Get(ctx, "in-the-operators-etcd", metav1.GetOptions{})
			return err
		})
	})
	t.Run("Refusals", func(t *testing.T) { testDatastoreRefusals(ctx, t, h, ext, podsExt, k1m, dataRoot) })
}

// testDatastoreRefusals starts servers on the host that must be refused,
// each naming the flag, and asks server 1 for a snapshot of a store it
// does not keep.
func testDatastoreRefusals(ctx context.Context, t *testing.T, h *localcluster.Cluster, ext, podsExt *externalEtcd, k1m, dataRoot string) {
	s1 := h.Server(1)
	token, err := os.ReadFile(s1.ServerTokenFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		flags []string
		env   []string
		want  string
	}{
		{"a second cluster on the same etcd", ext.flags(), nil,
			"--datastore-endpoint " + ext.endpoint + ": the etcd holds another cluster's data (its /k1m/cluster-ca is "},
		{"a second cluster on the same partition's etcd", append(ext.another(ctx, t, "operator-etcd-second").flags(), "--etcd-partitions=pods", "--datastore-partition-endpoint=pods="+podsExt.endpoint), nil,
			"--datastore-partition-endpoint pods=" + podsExt.endpoint + ": the etcd holds another cluster's data (its /k1m/cluster-ca is "},
		{"a join without the cluster's datastore", []string{"--server", s1.URL(), "--pod-routes=provider"}, []string{"K1M_TOKEN=" + strings.TrimSpace(string(token))},
			"--datastore-endpoint is not set: the cluster keeps this store in the external etcd at " + ext.endpoint + "; start this one with --datastore-endpoint=" + ext.endpoint},
		// Its kube-apiserver would keep Pods in the durable store, apart
		// from every other server's.
		{"a join without the cluster's partitions", append([]string{"--server", s1.URL(), "--pod-routes=provider"}, ext.flags()...), []string{"K1M_TOKEN=" + strings.TrimSpace(string(token))},
			"--etcd-partitions=: the cluster keeps pods in partitions of their own (recorded in its durable etcd when it was made): give every server --etcd-partitions=pods"},
		{"a join with the pods partition elsewhere", append([]string{"--server", s1.URL(), "--pod-routes=provider", "--etcd-partitions=pods", "--datastore-partition-endpoint=pods=" + ext.endpoint}, ext.flags()...), []string{"K1M_TOKEN=" + strings.TrimSpace(string(token))},
			"--datastore-partition-endpoint pods " + ext.endpoint + " differs from the cluster's " + podsExt.endpoint + ": every server of a cluster has the same; start this one with --datastore-partition-endpoint pods=" + podsExt.endpoint},
		{"a join with k1m's pod routes", append([]string{"--server", s1.URL(), "--etcd-partitions=pods", "--datastore-partition-endpoint=pods=" + podsExt.endpoint}, ext.flags()...), []string{"K1M_TOKEN=" + strings.TrimSpace(string(token))},
			"--pod-routes k1m differs from the cluster's provider: every server of a cluster has the same, k1m or provider, chosen when the cluster is made; start this one with --pod-routes=provider"},
	} {
		dir := filepath.Join(dataRoot, "refused-server")
		os.RemoveAll(dir)
		args := append([]string{"server", "--data-dir", dir, "--disable-agent", "--node-name", "k1m-server-refused"}, c.flags...)
		cmd := exec.CommandContext(ctx, k1m, args...)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), failedPrefix+c.want) {
			t.Errorf("%s: %v, output:\n%s\nwant an error starting %q", c.name, err, tail(out), c.want)
		}
		os.RemoveAll(dir)
	}
	out, err := exec.CommandContext(ctx, k1m, "etcd-snapshot", "save", "--data-dir", s1.DataDir).CombinedOutput()
	want := "the server with --data-dir " + s1.DataDir + " keeps its durable store in the external etcd at " + ext.endpoint +
		" (--datastore-endpoint): snapshot it with that etcd's own tools (etcdctl snapshot save), and each partition's etcd (--datastore-partition-endpoint) with it"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("k1m etcd-snapshot save: %v\n%s\nwant %q", err, out, want)
	}
}

// testProviderRoutes checks the cluster whose pod ranges the provider
// routes (the harness's host, every node namespace's gateway):
// k1m-cluster says so, no server publishes routes (no route ConfigMap, no
// holder of the route publisher's Lease), no node's routing table holds
// another node's pod range, and pods on one node reach pods on the others
// and the Service (clustercheck.ServiceAcrossNodes) through the host.
func testProviderRoutes(ctx context.Context, t *testing.T, h *localcluster.Cluster, client kubernetes.Interface, k1m string) {
	cm, err := client.CoreV1().ConfigMaps(join.PublicNamespace).Get(ctx, join.SettingsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := join.SettingsFromData(cm.Data); err != nil || s.PodRoutes != constants.PodRoutesProvider {
		t.Errorf("%s/%s: pod routes %q (%v), want %s", join.PublicNamespace, join.SettingsName, s.PodRoutes, err, constants.PodRoutesProvider)
	}
	routes, err := client.CoreV1().ConfigMaps(podnet.RoutesNamespace).List(ctx, metav1.ListOptions{LabelSelector: podnet.RouteLabel})
	if err != nil || len(routes.Items) != 0 {
		t.Errorf("%s holds %d route ConfigMaps (%v), want none", podnet.RoutesNamespace, len(routes.Items), err)
	}
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, server.RoutesElection, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the route publisher's Lease kube-system/%s: %v, want none (no server runs the publisher)", server.RoutesElection, err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[string]netip.Prefix{}
	for _, n := range nodes.Items {
		for _, cidr := range n.Spec.PodCIDRs {
			ranges[n.Name] = netip.MustParsePrefix(cidr)
		}
	}
	if len(ranges) != 3 {
		t.Fatalf("pod ranges %v, want one for each of 3 nodes", ranges)
	}
	for i := 1; i <= 3; i++ {
		n := h.Server(i)
		table, err := network.RoutesIn(n.Netns)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range table {
			for node, podRange := range ranges {
				if node != n.Name && r.Dst.Bits() > 0 && r.Dst.Overlaps(podRange) {
					t.Errorf("node %s routes %s via %s: node %s's pod range %s is the provider's to route", n.Name, r.Dst, r.Via, node, podRange)
				}
			}
		}
	}
	c := &adminCluster{client: client, k1m: k1m, kubeconfig: h.Server(1).AdminKubeconfig()}
	clustercheck.ServiceAcrossNodes(ctx, t, c, clustercheck.Layout{Namespace: testNamespace, Image: busybox,
		ClientNode: h.Server(1).Name, BackendNodes: []string{h.Server(2).Name, h.Server(3).Name}})
}

// adminCluster is a cluster of the harness for clustercheck's checks
// that go through the API alone.
type adminCluster struct {
	client          kubernetes.Interface
	k1m, kubeconfig string
}

func (c *adminCluster) Client() kubernetes.Interface { return c.client }

func (c *adminCluster) Kubectl(args ...string) (string, error) {
	out, err := exec.Command(c.k1m, append([]string{"kubectl", "--kubeconfig", c.kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

func (c *adminCluster) CountKeys(context.Context, clustercheck.Store, string) (int64, error) {
	return 0, errors.New("the stores are not read here")
}

// testLocalStorageLeftOut wants none of the local-storage component's
// objects (manifests/local-storage.yaml) in a cluster whose servers run
// with --disable=local-storage; CoreDNS, applied in the same step, is
// there.
func testLocalStorageLeftOut(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	if _, err := client.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Fatalf("CoreDNS, applied with the packaged components: %v", err)
	}
	_, errClass := client.StorageV1().StorageClasses().Get(ctx, clustercheck.DefaultStorageClass, metav1.GetOptions{})
	_, errNamespace := client.CoreV1().Namespaces().Get(ctx, "local-path-storage", metav1.GetOptions{})
	_, errRole := client.RbacV1().ClusterRoles().Get(ctx, "k1m:local-path-provisioner", metav1.GetOptions{})
	for what, err := range map[string]error{"StorageClass local-path": errClass, "Namespace local-path-storage": errNamespace, "ClusterRole k1m:local-path-provisioner": errRole} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s with --disable=local-storage: %v, want NotFound", what, err)
		}
	}
}
