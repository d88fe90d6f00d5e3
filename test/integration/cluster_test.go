// Package integration starts a real k1m cluster from the built binary
// (k1m server + two agents, each in its own network namespace, via the
// local cluster harness, test/localcluster) and checks it through the API
// and both etcds.
// It needs root, `make build` and `make images`; `make integration` runs it.
package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/localcluster"
)

// The cluster under test renews node Leases every 5 s, not the default
// 10 s, so that the test sees the configured value end to end.
const (
	renewInterval = 5 * time.Second
	leaseDuration = 4 * renewInterval
	nodes         = 3
)

type cluster struct {
	root, dataRoot, clusterDir, k1m string
	client                          kubernetes.Interface
	renew                           time.Duration // the server's renew interval; renewInterval until a test changes it
	partitions                      string        // the server's --etcd-partitions, once a test moved resources into them
	t                               *testing.T    // the top test, for helpers that fail it
}

// harness is the local cluster harness for this cluster, with the server
// flags of the moment (a test changes c.renew or c.partitions between
// server starts).
func (c *cluster) harness(t *testing.T) *localcluster.Cluster {
	t.Helper()
	args := []string{"--node-lease-renew-interval=" + c.renew.String()}
	if c.partitions != "" {
		args = append(args, "--etcd-partitions="+c.partitions)
	}
	h, err := localcluster.New(localcluster.Options{Nodes: nodes, K1M: c.k1m, ClusterDir: c.clusterDir, DataRoot: c.dataRoot,
		ImagesDir:  filepath.Join(c.root, "_output", "images"),
		ServerArgs: append(append(args, c.securityServerArgs()...), serverNodeFlags...),
		AgentArgs:  agentNodeFlags})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// must fails t when a harness step failed.
func must(t *testing.T, step string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

func (c *cluster) kubectl(args ...string) (string, error) {
	all := append([]string{"kubectl", "--kubeconfig", c.adminKubeconfig()}, args...)
	out, err := exec.Command(c.k1m, all...).CombinedOutput()
	return string(out), err
}

func (c *cluster) adminKubeconfig() string {
	return datadir.Server(filepath.Join(c.dataRoot, "server")).AdminKubeconfig()
}

// clusterPaths skips a test that cannot start a cluster (not root), and
// names the repository root, a fresh log directory _output/logs (logs
// stay there for a look after a failure) and a fresh data root (which
// the test removes, once the harness's Down has released its mounts).
func clusterPaths(t *testing.T, logs string) (root, clusterDir, dataRoot string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root (network namespaces, containerd)")
	}
	root, _ = filepath.Abs(filepath.Join("..", ".."))
	clusterDir = filepath.Join(root, "_output", logs)
	os.RemoveAll(clusterDir)
	dataRoot, err := os.MkdirTemp("", "k1m-"+logs+"-")
	if err != nil {
		t.Fatal(err)
	}
	return root, clusterDir, dataRoot
}

// tearDown takes a test's cluster down, showing the logs' last lines when
// the test failed, checks that nothing is left and removes the data.
func tearDown(t *testing.T, h *localcluster.Cluster, clusterDir, dataRoot string) {
	if t.Failed() {
		dumpLogs(t, clusterDir)
	}
	must(t, "down", h.Down(context.Background()))
	checkNothingLeft(t, dataRoot)
	os.RemoveAll(dataRoot)
}

func TestCluster(t *testing.T) {
	root, clusterDir, dataRoot := clusterPaths(t, "integration")
	c := &cluster{root: root, dataRoot: dataRoot, clusterDir: clusterDir, k1m: filepath.Join(root, "_output", "bin", "k1m"), t: t, renew: renewInterval}
	if _, err := os.Stat(c.k1m); err != nil {
		t.Fatalf("%s missing: run make build images first", c.k1m)
	}
	defer func() { tearDown(t, c.harness(t), clusterDir, dataRoot) }()
	leaveStaleNamespace(t)
	must(t, "up", c.harness(t).Up(context.Background()))
	cfg, err := testutil.RESTConfig(c.adminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	c.client = kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := testutil.Budget(t, 10*time.Minute)
	defer cancel()

	flaps := watchNotReady(ctx, t, c.client)
	// Checked late: metrics-server's first samples take a minute.
	hpa := clustercheck.StartHPA(ctx, t, c, "metrics", airgap.BusyboxImage)
	// Sampled while the next subtests run (none restarts an agent), and
	// checked after Security.
	leases := sampleLeases(ctx, c)
	t.Run("NodesReadyWithIPv6", func(t *testing.T) { clustercheck.Nodes(ctx, t, c, nodes) })
	t.Run("NodeLabelsTaintsAndRoles", func(t *testing.T) { testNodeLabelsAndTaints(ctx, t, c) })
	t.Run("PodsAcrossNodesServiceAndDNS", func(t *testing.T) { testServiceAcrossNodes(ctx, t, c) })
	t.Run("NodePortOnEveryNodeFromSameNode", func(t *testing.T) { testNodePortEveryNode(ctx, t, c) })
	t.Run("EventsAndLeasesInNoFsyncEtcd", func(t *testing.T) { clustercheck.EtcdSplit(ctx, t, c) })
	t.Run("RuntimeTuningAndHashmapWatchCache", func(t *testing.T) { testRuntimeTuning(t, c) })
	t.Run("SchedulerRunsK1msConfiguration", func(t *testing.T) { testSchedulerConfiguration(ctx, t, c) })
	t.Run("ControlPlaneMemoryLimitAndReservation", func(t *testing.T) { testControlPlaneMemory(ctx, t, c) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, c) })
	t.Run("AgentNewerThanAServerRefused", func(t *testing.T) { testReleaseSkew(ctx, t, c) })
	t.Run("Security", func(t *testing.T) { testSecurity(ctx, t, c) })
	t.Run("LeaseRenewInterval", func(t *testing.T) { testLeaseRenewal(t, leases) })
	// Its count includes metrics-server's watch: by now it is available.
	t.Run("NoNodeWatchesEveryNode", func(t *testing.T) { testNodeWatches(ctx, t, c) })
	t.Run("CertificatesCheckAndRotate", func(t *testing.T) { testCertificates(t, c) })
	t.Run("DiskThresholdsAndLostImagesReimported", func(t *testing.T) { testDisk(ctx, t, c) })
	t.Run("MetricsAPIAndHorizontalPodAutoscaler", func(t *testing.T) { testMetrics(ctx, t, c, hpa) })
	t.Run("NetworkPolicyEnforced", func(t *testing.T) { testNetworkPolicy(ctx, t, c) })
	if got := flaps.stop(); len(got) > 0 {
		t.Errorf("nodes went NotReady during the test: %v", got)
	}
	// After the NotReady watch: the restart stops a node on purpose.
	t.Run("AgentRestartsOnItsOwnCertificate", func(t *testing.T) { testAgentRestartWithoutToken(ctx, t, c) })
	t.Run("PersistentVolumesOnLocalPath", func(t *testing.T) { testPersistentVolumes(ctx, t, c) })
	t.Run("CrashKeepsAcknowledgedWrites", func(t *testing.T) { testCrash(ctx, t, c) })
	t.Run("NoFsyncStoreIsDisposable", func(t *testing.T) { testNoFsyncStoreDisposable(ctx, t, c) })
	t.Run("SnapshotAndRestore", func(t *testing.T) { testSnapshotRestore(ctx, t, c) })
	t.Run("MoveIntoPartitions", func(t *testing.T) { testMoveIntoPartitions(ctx, t, c) })
	// Last: it leaves the cluster on another lease profile.
	t.Run("LeaseProfileChange", func(t *testing.T) { testLeaseProfileChange(ctx, t, c) })
}

// leaveStaleNamespace makes what a cluster killed without the harness's
// Down leaves behind: an empty k1m-node-1 network namespace. up must clear
// it (a CI run once failed with "Cannot create namespace file
// /run/netns/k1m-node-1: File exists").
func leaveStaleNamespace(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/run/netns/k1m-node-1"); err == nil {
		return // left already; up handles it, or refuses if it is in use
	}
	if out, err := exec.Command("ip", "netns", "add", "k1m-node-1").CombinedOutput(); err != nil {
		t.Fatalf("ip netns add k1m-node-1: %v: %s", err, out)
	}
}

// dumpLogs prints the last lines of each log under dir. Few: CI reports
// a part of a failed run's output, and many log lines after a failure
// once left its messages out (the whole logs stay in dir).
func dumpLogs(t *testing.T, dir string) {
	const lastLines = 12
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		lines := strings.Split(string(data), "\n")
		if len(lines) > lastLines {
			lines = lines[len(lines)-lastLines:]
		}
		t.Logf("--- last lines of %s:\n%s", l, strings.Join(lines, "\n"))
	}
}

// k1mProcesses lists the k1m and containerd processes running, leaving out
// Docker's own containerd and its shims (make kind-image starts dockerd).
func k1mProcesses() string {
	out, _ := exec.Command("pgrep", "-af", "k1m (server|agent)|containerd").Output()
	var left []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.Contains(line, "/var/run/docker/") && !strings.Contains(line, "-namespace moby") {
			left = append(left, line)
		}
	}
	return strings.Join(left, "\n")
}

// checkNothingLeft wants no k1m process, node namespace, mount, cgroup or
// KUBE-* packet-filter chain after the harness's Down.
func checkNothingLeft(t *testing.T, dataRoot string) {
	if left := k1mProcesses(); left != "" {
		t.Errorf("processes left after down:\n%s", left)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "k1m-node-") || strings.Contains(string(out), "cni-") {
		t.Errorf("network namespaces left after down:\n%s", out)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, dataRoot) || strings.Contains(line, "/run/k1m") || strings.Contains(line, "/run/netns") {
			t.Errorf("mount left after down: %s", line)
		}
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		if out, _ := exec.Command(tool).Output(); strings.Contains(string(out), "KUBE-") {
			t.Errorf("%s shows KUBE-* rules after down", tool)
		}
	}
	for _, cg := range []string{"/sys/fs/cgroup/memory/k1m", "/sys/fs/cgroup/memory/k1m-control-plane"} {
		if _, err := os.Stat(cg); err == nil {
			t.Errorf("cgroup %s left after down", cg)
		}
	}
	if _, err := exec.Command("ip", "link", "show", "k1m-nodes").Output(); err == nil {
		t.Errorf("bridge k1m-nodes left after down")
	}
}
