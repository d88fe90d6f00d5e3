package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/agent/loadbalancer"
	"k1m.dev/k1m/pkg/approver"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/netpol"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/readiness"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/serverbundle"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/faults"
	"k1m.dev/k1m/test/localcluster"
)

const (
	multiServers = 3
	multiNodes   = 5 // each server's node and two agents
	// multiPartitionQuota is each partition's quota: small, so that
	// filling one takes seconds.
	multiPartitionQuota = 32 << 20
)

// multiPartitions are the store partitions the cluster is made with, by
// their members' client ports (--etcd-port plus their offsets): every
// join, removal, kill and restore below runs over them too. The
// ConfigMaps written through kills and restores, and the Secrets
// encryption keys every server reads at its start, are in the configmaps
// partition.
var multiPartitions = map[string]int{"pods": 2383, "nodes": 2385, "configmaps": 2389}

// multiPartitionsFlag is the servers' --etcd-partitions.
const multiPartitionsFlag = "--etcd-partitions=pods,nodes,configmaps"

// multiCluster is a cluster of several servers under test.
type multiCluster struct {
	h       *localcluster.Cluster
	k1m     string
	clients []kubernetes.Interface // by server index - 1
}

func (m *multiCluster) client(i int) kubernetes.Interface { return m.clients[i-1] }

// TestMultiServer runs 3 servers (--cluster-init, then two joined with
// --server) and 2 agents, each in its own network namespace, and checks
// the raft membership of both etcds, one active controller-manager and
// scheduler, the agents following every API server, a server killed with
// SIGKILL while a client writes through another, its rejoin, a killed
// controller-manager started again by its server, and the
// refusals of a bad join or removal.
func TestMultiServer(t *testing.T) {
	root, clusterDir, dataRoot := clusterPaths(t, "integration-multiserver")
	k1m := filepath.Join(root, "_output", "bin", "k1m")
	h, err := localcluster.New(localcluster.Options{Servers: multiServers, Nodes: multiNodes, K1M: k1m, ClusterDir: clusterDir, DataRoot: dataRoot,
		ImagesDir:  filepath.Join(root, "_output", "images"),
		ServerArgs: []string{multiPartitionsFlag, "--etcd-partition-quota-backend-bytes=" + strconv.Itoa(multiPartitionQuota)}})
	if err != nil {
		t.Fatal(err)
	}
	defer tearDown(t, h, clusterDir, dataRoot)
	must(t, "up", h.Up(context.Background()))
	m := &multiCluster{h: h, k1m: k1m}
	for i := 1; i <= multiServers; i++ {
		cfg, err := testutil.RESTConfig(h.Server(i).AdminKubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Timeout = 5 * time.Second
		m.clients = append(m.clients, kubernetes.NewForConfigOrDie(cfg))
	}
	ctx, cancel := testutil.Budget(t, 13*time.Minute)
	defer cancel()
	t.Run("NodesReadyAndRaftMembers", func(t *testing.T) {
		requireNodesReady(ctx, t, m.client(1), multiNodes)
		m.requireMembers(ctx, t)
	})
	t.Run("PartitionsHoldTheirResources", func(t *testing.T) { m.requirePartitionsHold(ctx, t) })
	t.Run("FullPartitionLeavesTheOthersWriting", func(t *testing.T) { m.testFullPartition(ctx, t) })
	t.Run("OneLeaderOfEachElection", func(t *testing.T) { m.requireOneLeader(ctx, t) })
	t.Run("AgentsFollowEveryServer", func(t *testing.T) { m.requireAgentsFollow(t) })
	t.Run("EveryServerReadyToANodeCertificateOnly", func(t *testing.T) { m.requireServersReady(t) })
	// Each server's kube-apiserver and kube-scheduler, the leading
	// controller-manager, route publisher and approver, metrics-server: 10
	// with 3 servers whatever the nodes (a watch of every Node per node
	// would add 5).
	t.Run("NoWatchOfEveryNodePerNode", func(t *testing.T) {
		requireEveryNodeWatches(ctx, t, m.clients, multiNodes, 10)
	})
	t.Run("ServerWithoutQuorumIsLeft", func(t *testing.T) { m.testServerWithoutQuorumIsLeft(ctx, t) })
	t.Run("KillServerWhileWriting", func(t *testing.T) { m.testKillServer(ctx, t) })
	// After KillServerWhileWriting, which wants one server to have taken
	// the controller-manager's Lease.
	t.Run("KilledControllerManagerStartedAgain", func(t *testing.T) { m.testControllerManagerKilled(ctx, t) })
	t.Run("APIServerOnlyServer", func(t *testing.T) { m.testAPIServerOnly(ctx, t, dataRoot, clusterDir) })
	t.Run("JoinRefusals", func(t *testing.T) { m.testJoinRefusals(ctx, t, dataRoot) })
	t.Run("KubeSystemReaderCannotUnsealTheCAs", func(t *testing.T) { m.testBundleSealed(ctx, t) })
	t.Run("SecretsEncryptionOnAndRotatedOnARunningCluster", func(t *testing.T) { m.testSecretsEncryption(ctx, t) })
	var oldServerToken string
	t.Run("TokenRotationRetiresTheOldServerToken", func(t *testing.T) { oldServerToken = m.testRotation(ctx, t, dataRoot) })
	t.Run("RemoveRefusedWithoutQuorum", func(t *testing.T) { m.testRemoveRefused(ctx, t) })
	// Joins with the server token the rotation made.
	t.Run("ReplaceDeadServer", func(t *testing.T) { m.testReplaceDeadServer(ctx, t, dataRoot, clusterDir) })
	t.Run("EveryServerFollowsTheRotation", func(t *testing.T) { m.requireRotationFollowed(ctx, t, oldServerToken) })
	// Last: it restores the whole cluster to a snapshot.
	t.Run("RestoreOnOneServerFencesTheOthers", func(t *testing.T) { m.testRestoreFenced(ctx, t) })
}

// testRestoreFenced runs docs/operations.md's HA restore: a snapshot on
// server 1, a write after it, every server stopped, server 1 restored and
// started; server 2 started on its old data is refused, naming both
// incarnations, and rejoins with an empty data directory once k1m server
// remove took its records: both etcds then hold servers 1 and 2 alone,
// and the write after the snapshot is gone.
func (m *multiCluster) testRestoreFenced(ctx context.Context, t *testing.T) {
	s1, s2 := m.h.Server(1), m.h.Server(2)
	inNetns := func(n localcluster.Node, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + n.Netns, m.k1m}, args...)...).CombinedOutput()
		return string(out), err
	}
	pods := m.client(1).CoreV1().Pods("default")
	must(t, "a pod before the snapshot", createPendingPod(ctx, pods, "before-the-snapshot"))
	out, err := inNetns(s1, "etcd-snapshot", "save", "--data-dir", s1.DataDir, "--name", "ha-restore")
	saved := savedSnapshot.FindStringSubmatch(out)
	if err != nil || saved == nil {
		t.Fatalf("etcd-snapshot save: %v\n%s", err, out)
	}
	snapshot := filepath.Join(saved[2], saved[1])
	cms := m.client(1).CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-the-snapshot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, "a pod after the snapshot", createPendingPod(ctx, pods, "after-the-snapshot"))
	must(t, "the pod before the snapshot deleted", pods.Delete(ctx, "before-the-snapshot", metav1.DeleteOptions{}))
	for i := 1; i <= multiServers; i++ {
		must(t, fmt.Sprintf("stop-server %d", i), m.h.StopServer(ctx, i))
	}
	var reset strings.Builder
	if err := m.h.ResetServer(ctx, &reset, snapshot); err != nil {
		t.Fatalf("restore on server 1: %v\n%s", err, reset.String())
	}
	must(t, "start-server 1", m.h.StartServer(ctx, 1))

	stale, restored := readIncarnation(t, s2.DataDir), readIncarnation(t, s1.DataDir)
	if restored.Replaces != stale.ID {
		t.Errorf("server 1's incarnation %+v does not replace server 2's %+v", restored, stale)
	}
	if err := m.h.StartServer(ctx, 2); err == nil {
		t.Fatal("server 2 started on its data from before the restore")
	}
	want := fmt.Sprintf("this server's data (%s) is of incarnation %s, but the durable etcd at https://[%s]:2379 runs incarnation %s: "+
		"the cluster was restored or reset since, and this data is the cluster as it was before, which must not rejoin it; "+
		"on a running server run k1m server remove %s, then move %s away and start this server with an empty --data-dir, --server and --token "+
		"(docs/operations.md, \"Restoring a cluster of several servers\")", s2.DataDir, stale, s1.Addr, restored, s2.Name, s2.DataDir)
	// The server logs its error through klog, quoted.
	if log, _ := os.ReadFile(s2.LogFile); !strings.Contains(string(log), `"command failed" err=`+strconv.Quote(want)) {
		t.Errorf("server 2 on its old data: its log lacks the refusal\n%s\nlog:\n%s", want, log)
	}

	if out, err := inNetns(s1, "server", "remove", s2.Name, "--data-dir", s1.DataDir); err != nil {
		t.Fatalf("k1m server remove %s: %v\n%s", s2.Name, err, out)
	}
	must(t, "move server 2's data away", os.Rename(s2.DataDir, s2.DataDir+".before-restore"))
	must(t, "start-server 2 on empty data", m.h.StartServer(ctx, 2))
	m.requireMembersNamed(ctx, t, []string{s1.Name, s2.Name})
	// Its node joins again: k1m server remove released the name.
	testutil.Eventually(t, 3*time.Minute, "node "+s2.Name+" Ready", func() error {
		n, err := m.client(1).CoreV1().Nodes().Get(ctx, s2.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !clustercheck.Ready(n) {
			return fmt.Errorf("node %s not Ready", s2.Name)
		}
		return nil
	})
	if _, err := m.client(2).CoreV1().ConfigMaps("default").Get(ctx, "after-the-snapshot", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap written after the snapshot, after the restore: %v, want NotFound", err)
	}
	// The pods partition is restored with the durable etcd.
	restoredPods := m.client(2).CoreV1().Pods("default")
	if _, err := restoredPods.Get(ctx, "after-the-snapshot", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod created after the snapshot, after the restore: %v, want NotFound", err)
	}
	if _, err := restoredPods.Get(ctx, "before-the-snapshot", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod created before the snapshot (deleted after it), after the restore: %v, want it back", err)
	}
}

func readIncarnation(t *testing.T, dataDir string) etcd.Incarnation {
	t.Helper()
	var rec struct {
		Incarnation etcd.Incarnation `json:"incarnation"`
	}
	data, err := os.ReadFile(filepath.Join(dataDir, "incarnation.json"))
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil || rec.Incarnation.ID == "" {
		t.Fatalf("%s/incarnation.json: %v (%s)", dataDir, err, data)
	}
	return rec.Incarnation
}

func requireNodesReady(ctx context.Context, t *testing.T, client kubernetes.Interface, want int) {
	t.Helper()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, n := range list.Items {
		if clustercheck.Ready(&n) {
			ready++
		}
	}
	if ready != want {
		t.Errorf("%d of %d nodes Ready, want %d", ready, len(list.Items), want)
	}
}

// serverNames are the servers' node (and etcd member) names.
func (m *multiCluster) serverNames() []string {
	var out []string
	for i := 1; i <= multiServers; i++ {
		out = append(out, m.h.Server(i).Name)
	}
	return out
}

// requireMembers wants every server a voting member of every etcd group, seen
// from server 1's durable etcd at its advertised address.
func (m *multiCluster) requireMembers(ctx context.Context, t *testing.T) {
	t.Helper()
	m.requireMembersNamed(ctx, t, m.serverNames())
}

// requireMembersNamed wants exactly these voting members in every etcd
// group: durable, no-fsync and each partition.
func (m *multiCluster) requireMembersNamed(ctx context.Context, t *testing.T, want []string) {
	t.Helper()
	s1 := m.h.Server(1)
	tls := server.EtcdClientTLS(s1.DataDir)
	ports := []int{2379, 2381}
	for _, port := range multiPartitions {
		ports = append(ports, port)
	}
	sort.Ints(ports)
	for _, port := range ports {
		url := fmt.Sprintf("https://[%s]:%d", s1.Addr, port)
		var got []string
		deadline := time.Now().Add(time.Minute)
		for {
			got = nil
			cli, err := etcd.NewClient([]string{url}, tls)
			if err != nil {
				t.Fatal(err)
			}
			members, err := etcd.Members(ctx, cli)
			cli.Close()
			for _, mem := range members {
				name := mem.Name
				if mem.IsLearner {
					name += " (learner)"
				}
				got = append(got, name)
			}
			if err == nil && reflect.DeepEqual(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("etcd at %s: members %v (%v), want %v", url, got, err, want)
				break
			}
			time.Sleep(2 * time.Second)
		}
	}
}

// requireOneLeader wants each election's Lease held by one of the
// servers and renewed within its 15 s duration. kube-controller-manager's
// and kube-scheduler's identities are hostname_uuid (each harness server
// has a hostname of its own, its name); k1m's own elections take the
// server's node name.
func (m *multiCluster) requireOneLeader(ctx context.Context, t *testing.T) {
	servers := m.h.ServerNames()
	for _, election := range []string{"kube-controller-manager", "kube-scheduler", approver.Election, server.RoutesElection, netpol.Election} {
		testutil.Eventually(t, 30*time.Second, "the Lease kube-system/"+election+" held by a server", func() error {
			lease, err := m.client(1).CoordinationV1().Leases("kube-system").Get(ctx, election, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.HolderIdentity == nil || lease.Spec.RenewTime == nil {
				return fmt.Errorf("no holder")
			}
			holder := *lease.Spec.HolderIdentity
			if host, _, _ := strings.Cut(holder, "_"); !slices.Contains(servers, host) {
				return fmt.Errorf("held by %s, none of the servers %q", holder, servers)
			}
			if age := time.Since(lease.Spec.RenewTime.Time); age > 15*time.Second {
				return fmt.Errorf("held by %s, renewed %s ago", holder, age.Round(time.Second))
			}
			return nil
		})
	}
}

// requireAgentsFollow wants every agent's load balancer to know every
// API server (within 30 s: each follows the EndpointSlices once its node
// has its own certificate).
func (m *multiCluster) requireAgentsFollow(t *testing.T) {
	var want []string
	for i := 1; i <= multiServers; i++ {
		want = append(want, fmt.Sprintf("[%s]:6443", m.h.Server(i).Addr))
	}
	sort.Strings(want)
	for i := 1; i <= multiNodes-multiServers; i++ {
		agent := m.h.Agent(i)
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := balancerServers(agent.DataDir)
			if err == nil && reflect.DeepEqual(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s's load balancer knows %v (%v), want %v", agent.Name, got, err, want)
				break
			}
			time.Sleep(time.Second)
		}
	}
}

// requireServersReady wants every server's readiness endpoint to answer
// an agent's node certificate with 200 "ok", and to refuse a client
// without a certificate.
func (m *multiCluster) requireServersReady(t *testing.T) {
	nodeCert := filepath.Join(m.h.Agent(1).DataDir, "kubelet-pki", "kubelet-client-current.pem")
	ca := filepath.Join(m.h.Server(1).DataDir, "tls", "ca.crt")
	for i := 1; i <= multiServers; i++ {
		url := fmt.Sprintf("https://[%s]:%d%s", m.h.Server(i).Addr, constants.ServerReadyPort, readiness.Path)
		requireReadyz(t, url, ca, loadPair(t, nodeCert, nodeCert))
		if code, err := httpsGet(t, url, ca, nil); err == nil {
			t.Errorf("%s answered a client without a certificate (HTTP %d), want the handshake refused", url, code)
		}
	}
}

// testServerWithoutQuorumIsLeft cuts agent 1's preferred server off from
// the other servers' etcds (its peer ports dropped both ways) while its
// process and kube-apiserver run on: its readiness turns 503 naming a
// store, and agent 1's load balancer reports it down and closes its
// connections. Healed, it is ready again.
func (m *multiCluster) testServerWithoutQuorumIsLeft(ctx context.Context, t *testing.T) {
	var addrs []string
	byAddr := map[string]int{}
	for i := 1; i <= multiServers; i++ {
		a := fmt.Sprintf("[%s]:6443", m.h.Server(i).Addr)
		addrs = append(addrs, a)
		byAddr[a] = i
	}
	agent := m.h.Agent(1)
	cut := m.h.Server(byAddr[loadbalancer.Order(agent.Name, addrs)[0]])
	rules := [][]string{
		{"INPUT", "-p", "tcp", "-m", "multiport", "--dports", "2380,2382", "-j", "DROP"},
		{"OUTPUT", "-p", "tcp", "-m", "multiport", "--dports", "2380,2382", "-j", "DROP"},
	}
	ip6tables := func(op string, rule []string) error {
		args := append([]string{"--net=/run/netns/" + cut.Netns, "ip6tables", op}, rule...)
		out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip6tables %s %v: %v: %s", op, rule, err, out)
		}
		return nil
	}
	heal := func() {
		for _, r := range rules {
			ip6tables("-D", r)
		}
	}
	defer heal()
	for _, r := range rules {
		if err := ip6tables("-A", r); err != nil {
			t.Fatal(err)
		}
	}
	nodeCert := filepath.Join(agent.DataDir, "kubelet-pki", "kubelet-client-current.pem")
	ca := filepath.Join(m.h.Server(1).DataDir, "tls", "ca.crt")
	url := fmt.Sprintf("https://[%s]:%d%s", cut.Addr, constants.ServerReadyPort, readiness.Path)
	testutil.Eventually(t, time.Minute, cut.Name+" not ready", func() error {
		code, err := httpsGet(t, url, ca, loadPair(t, nodeCert, nodeCert))
		if err != nil || code != 503 {
			return fmt.Errorf("HTTP %d, %v; want 503", code, err)
		}
		return nil
	})
	down := fmt.Sprintf("k1m agent: load balancer: server [%s]:6443 is down (/k1m/readyz: 503 not ready: ", cut.Addr)
	testutil.Eventually(t, time.Minute, agent.Name+" leaves "+cut.Name, func() error {
		log, err := os.ReadFile(agent.LogFile)
		if err != nil || !strings.Contains(string(log), down) {
			return fmt.Errorf("its log does not say %q (%v)", down, err)
		}
		return nil
	})
	heal()
	requireReadyz(t, url, ca, loadPair(t, nodeCert, nodeCert))
}

// balancerServers reads the server list an agent's load balancer saved.
func balancerServers(dataDir string) ([]string, error) {
	var state struct {
		Servers []string `json:"servers"`
	}
	data, err := os.ReadFile(filepath.Join(dataDir, "apiservers.json"))
	if err == nil {
		err = json.Unmarshal(data, &state)
	}
	sort.Strings(state.Servers)
	return state.Servers, err
}

// testKillServer kills the server whose controller-manager leads, with
// SIGKILL, while a client writes ConfigMaps through another server: the
// writes go on within seconds (etcd elects a leader), no acknowledged
// write is lost, another controller-manager takes over, no other node
// goes NotReady, every Lease keeps renewing; the killed server starts
// again and rejoins both etcds.
func (m *multiCluster) testKillServer(ctx context.Context, t *testing.T) {
	// The leader is read from the Lease (renewed within seconds): the
	// fault before this one (ServerWithoutQuorumIsLeft isolates a server,
	// which may lead) can leave leadership moving for a Lease duration.
	victim, holder := m.controllerManagerLeader(ctx, t)
	via := victim%multiServers + 1
	client := m.client(via)
	t.Logf("killing server %d (its controller-manager leads as %s); writing through server %d", victim, holder, via)
	flaps := watchNotReady(ctx, t, client)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "k1m-multiserver"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := faults.StartWriter(ctx, client, ns.Name, "write", 0)
	time.Sleep(5 * time.Second)
	if now := leaseHolder(ctx, client, "kube-controller-manager"); now != holder {
		t.Fatalf("the controller-manager Lease moved from %s to %s before the kill", holder, now)
	}
	killed := time.Now()
	pidData, err := os.ReadFile(m.h.Server(victim).PidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(pidData), &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted { // the tests after this one want every server
			if err := m.h.StartServer(ctx, victim); err != nil {
				t.Errorf("starting server %d again after the failure: %v", victim, err)
			}
		}
	}()
	// Writes resume within seconds.
	resumed := w.FirstAckAfter(ctx, killed, 30*time.Second)
	if resumed.IsZero() {
		t.Fatalf("no write acknowledged within 30 s of the kill")
	}
	t.Logf("writes acknowledged again %s after the kill", resumed.Sub(killed).Round(time.Millisecond))
	if gap := resumed.Sub(killed); gap > 15*time.Second {
		t.Errorf("writes resumed %s after the kill, want within 15 s", gap)
	}
	// Another controller-manager takes the Lease.
	deadline := time.Now().Add(60 * time.Second)
	for leaseHolder(ctx, client, "kube-controller-manager") == holder {
		if time.Now().After(deadline) {
			t.Fatalf("the controller-manager Lease is still %s's 60 s after its server died", holder)
		}
		time.Sleep(time.Second)
	}
	t.Logf("a new controller-manager leads %s after the kill", time.Since(killed).Round(time.Second))
	// The killed server starts again and rejoins.
	restarted = true
	must(t, "start-server", m.h.StartServer(ctx, victim))
	acked := w.Stop()
	m.requireMembers(ctx, t)
	lost, err := faults.Missing(ctx, client, ns.Name, acked)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range lost {
		t.Errorf("acknowledged write %s lost", name)
	}
	t.Logf("%d writes acknowledged, all kept", len(acked))
	deadline = time.Now().Add(leaseDuration * 3)
	for {
		err := nodesRenewedAndReady(ctx, client, killed)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after the restart: %v", err)
			break
		}
		time.Sleep(time.Second)
	}
	victimNode := m.h.Server(victim).Name
	for _, f := range flaps.stop() {
		if f.Node != victimNode {
			t.Errorf("while server %d was down or after: %s", victim, f)
		} else {
			t.Logf("the killed server's own node (its kubelet died with it): %s", f)
		}
	}
}

func leaseHolder(ctx context.Context, client kubernetes.Interface, name string) string {
	lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// failedPrefix starts the line k1m logs when a command fails.
const failedPrefix = `"command failed" err="`

// testJoinRefusals starts a fourth server on the host with a bad join:
// each is refused naming the flag, with nothing written to its data
// directory but what a refusal leaves.
func (m *multiCluster) testJoinRefusals(ctx context.Context, t *testing.T, dataRoot string) {
	s1 := m.h.Server(1)
	serverToken, err := os.ReadFile(s1.ServerTokenFile())
	if err != nil {
		t.Fatal(err)
	}
	joinToken, err := os.ReadFile(s1.TokenFile())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, m.k1m, "token", "create", "--kubeconfig", s1.AdminKubeconfig()).Output()
	if err != nil {
		t.Fatalf("k1m token create: %v: %s", err, out)
	}
	agentToken := strings.TrimSpace(string(out))
	wrongCA := "K1M" + strings.Repeat("0", 64) + "::" + strings.SplitN(strings.TrimSpace(string(serverToken)), "::", 2)[1]
	for _, c := range []struct {
		name, token string
		flags       []string
		want        string
		cleared     bool // the token and settings pass: the CAs are fetched
	}{
		{"an agent's token", agentToken, nil, "--token: not a server token: token ", false},
		{"the servers' join token without the seal", strings.TrimSpace(string(joinToken)), nil, "--token: not a server token: token ", false},
		{"a token naming another CA", wrongCA, nil, "--token: the server's CA (sha256 ", false},
		{"another cluster domain", strings.TrimSpace(string(serverToken)), []string{"--cluster-domain=other.example"},
			"--cluster-domain other.example differs from the cluster's cluster.local: every server of a cluster has the same; start this one with --cluster-domain=cluster.local", false},
		// Refused before its durable member is added: one added and
		// never run would leave the cluster a voter short.
		{"other store partitions", strings.TrimSpace(string(serverToken)), []string{"--etcd-partitions=pods"},
			"--etcd-partitions=pods: the cluster keeps pods, nodes, configmaps in partitions of their own (recorded in its durable etcd when it was made): give every server " + multiPartitionsFlag, true},
	} {
		dir := filepath.Join(dataRoot, "refused-server")
		os.RemoveAll(dir)
		args := append([]string{"server", "--server", s1.URL(), "--data-dir", dir, "--disable-agent", "--node-name", "k1m-server-refused"}, c.flags...)
		cmd := exec.CommandContext(ctx, m.k1m, args...)
		cmd.Env = append(os.Environ(), "K1M_TOKEN="+c.token)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), failedPrefix+c.want) {
			t.Errorf("%s: %v, output:\n%s\nwant an error starting %q", c.name, err, tail(out), c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "tls", "ca.key")); err == nil && !c.cleared {
			t.Errorf("%s: the refused server wrote the cluster's CA key", c.name)
		}
		os.RemoveAll(dir)
	}
	m.requireMembers(ctx, t)
}

// testRemoveRefused stops server 2 and asks server 1 to remove server 3:
// two members would be left, one silent, so it is refused and nothing
// changes.
func (m *multiCluster) testRemoveRefused(ctx context.Context, t *testing.T) {
	s1 := m.h.Server(1)
	// A name no server has: refused, not reported as removed.
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+s1.Netns, m.k1m, "server", "remove", "k1m-no-such-server", "--data-dir", s1.DataDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "and no server of that name published itself: nothing to remove") {
		t.Errorf("k1m server remove of an unknown name: %v\n%s", err, out)
	}
	must(t, "stop-server 2", m.h.StopServer(ctx, 2))
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+s1.Netns, m.k1m, "server", "remove", m.h.Server(3).Name, "--data-dir", s1.DataDir)
	out, err = cmd.CombinedOutput()
	want := failedPrefix + fmt.Sprintf("durable etcd: removing %s would leave 2 voting etcd members of which 1 answer (%s silent): a quorum needs 2; bring a member back first",
		m.h.Server(3).Name, m.h.Server(2).Name)
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("k1m server remove with a quorum at stake: %v\n%s\nwant %q", err, out, want)
	}
	must(t, "start-server 2", m.h.StartServer(ctx, 2))
	m.requireMembers(ctx, t)
}

// testAPIServerOnly joins a fourth server with --disable-etcd on the host
// (the bridge's address): it serves reads and writes of both stores
// without becoming an etcd member, then is stopped and removed.
func (m *multiCluster) testAPIServerOnly(ctx context.Context, t *testing.T, dataRoot, logDir string) {
	s1 := m.h.Server(1)
	token, err := os.ReadFile(s1.ServerTokenFile())
	if err != nil {
		t.Fatal(err)
	}
	const name = "k1m-apiserver-4"
	dir := filepath.Join(dataRoot, "apiserver-4")
	client, stop := startHostServer(ctx, t, m.k1m, dir, logDir, name, m.h.Plan().Bridge.Addr.Addr().String(), strings.TrimSpace(string(token)),
		"--server", s1.URL(), "--disable-etcd", multiPartitionsFlag)
	defer stop()
	must(t, "a pod through the API-server-only server (the pods partition)", createPendingPod(ctx, client.CoreV1().Pods("default"), "through-an-api-only-server"))
	must(t, "delete the pod", client.CoreV1().Pods("default").Delete(ctx, "through-an-api-only-server", metav1.DeleteOptions{}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "through-an-api-only-server"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a write through the API-server-only server: %v", err)
	}
	if _, err := m.client(1).CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("server 1 does not see the write made through the API-server-only server: %v", err)
	}
	// The node Leases live in the no-fsync store: it reads them too.
	if _, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, m.h.Agent(1).Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the API-server-only server reads no Lease of %s: %v", m.h.Agent(1).Name, err)
	}
	m.requireMembers(ctx, t) // still the three servers with etcd
	logData, _ := os.ReadFile(filepath.Join(logDir, name+".log"))
	if !strings.Contains(string(logData), "no etcd here (--disable-etcd)") {
		t.Errorf("its log does not say it runs without etcd")
	}
	stop()
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+s1.Netns, m.k1m, "server", "remove", name, "--data-dir", s1.DataDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), name+" has no etcd member (an API-server-only server, --disable-etcd)") {
		t.Errorf("k1m server remove %s: %v\n%s", name, err, out)
	}
}

// startHostServer starts a server of the cluster on the host (no node
// agent), its log in logDir/name.log, and waits until it is ready; stop
// (SIGTERM, then SIGKILL after a minute) may be called more than once.
func startHostServer(ctx context.Context, t *testing.T, k1m, dir, logDir, name, ip, token string, flags ...string) (kubernetes.Interface, func()) {
	t.Helper()
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"server", "--disable-agent", "--data-dir", dir, "--node-name", name, "--node-ip", ip}, flags...)
	cmd := exec.Command(k1m, args...)
	cmd.Env = append(os.Environ(), "K1M_TOKEN="+token)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
			logFile.Close()
		})
	}
	client := waitServerReady(ctx, t, filepath.Join(dir, "admin.kubeconfig"), exited)
	return client, stop
}

// waitServerReady waits for a server's admin kubeconfig, /readyz and its
// token file (written last, once the server has published everything).
func waitServerReady(ctx context.Context, t *testing.T, kubeconfig string, exited <-chan error) kubernetes.Interface {
	t.Helper()
	var client kubernetes.Interface
	err := poll.Until(ctx, 2*time.Second, 3*time.Minute, "a server ready at "+kubeconfig, func(ctx context.Context) error {
		select {
		case err := <-exited:
			return poll.Stop(fmt.Errorf("the server exited: %w", err))
		default:
		}
		cfg, err := testutil.RESTConfig(kubeconfig)
		if err != nil {
			return err
		}
		cfg.Timeout = 5 * time.Second
		c := kubernetes.NewForConfigOrDie(cfg)
		if err := poll.APIServerReady(ctx, c.Discovery().RESTClient()); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(kubeconfig), "token")); err != nil {
			return err
		}
		client = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// testReplaceDeadServer replaces server 3 as an operator replaces a dead
// machine: it is stopped for good, removed from server 1, and a new
// server joins on the host (the bridge's address) with an empty data
// directory; both etcds then have servers 1, 2 and the new one as voting
// members, and the new one serves writes.
func (m *multiCluster) testReplaceDeadServer(ctx context.Context, t *testing.T, dataRoot, logDir string) {
	s1, dead := m.h.Server(1), m.h.Server(3)
	// Server 2 restarted in the test before: the removal's quorum check
	// needs it serving again.
	testutil.Eventually(t, 3*time.Minute, "server 2 ready", func() error {
		return poll.APIServerReady(ctx, m.client(2).CoreV1().RESTClient())
	})
	must(t, "stop-server 3", m.h.StopServer(ctx, 3))
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+s1.Netns, m.k1m, "server", "remove", dead.Name, "--data-dir", s1.DataDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed "+dead.Name+" from the durable etcd") {
		t.Fatalf("k1m server remove %s: %v\n%s", dead.Name, err, out)
	}
	if _, err := m.client(1).CoreV1().Nodes().Get(ctx, dead.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("Node %s is still there after k1m server remove", dead.Name)
	}
	m.requireMembersNamed(ctx, t, []string{m.h.Server(1).Name, m.h.Server(2).Name})
	m.requireAgentsForget(ctx, t, fmt.Sprintf("[%s]:6443", dead.Addr))
	token, err := os.ReadFile(s1.ServerTokenFile())
	if err != nil {
		t.Fatal(err)
	}
	const name = "k1m-server-4"
	dir := filepath.Join(dataRoot, name)
	// The cluster encrypts Secrets (testSecretsEncryption): a joining
	// server must too.
	client, stop := startHostServer(ctx, t, m.k1m, dir, logDir, name, m.h.Plan().Bridge.Addr.Addr().String(), strings.TrimSpace(string(token)), "--server", s1.URL(), "--secrets-encryption", multiPartitionsFlag)
	defer stop()
	m.requireMembersNamed(ctx, t, []string{m.h.Server(1).Name, m.h.Server(2).Name, name})
	// It adopted the cluster's keys: a Secret written through server 1
	// reads through it.
	if err := m.requireSecretsRead(ctx, []kubernetes.Interface{client}, []string{"rotated-through-1"}); err != nil {
		t.Errorf("through the replacement server: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "through-the-replacement"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Errorf("a write through the replacement server: %v", err)
	}
}

// requireAgentsForget wants a removed server's address in k1m-cluster's
// removed servers, and gone from every agent's saved server list within
// 30 s (the agents watch k1m-cluster).
func (m *multiCluster) requireAgentsForget(ctx context.Context, t *testing.T, address string) {
	cm, err := m.client(1).CoreV1().ConfigMaps(join.PublicNamespace).Get(ctx, join.SettingsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if removed := join.RemovedServers(cm.Data); !slices.Contains(removed, address) {
		t.Errorf("k1m-cluster's removed servers %v lack %s", removed, address)
	}
	for i := 1; i <= multiNodes-multiServers; i++ {
		agent := m.h.Agent(i)
		testutil.Eventually(t, 30*time.Second, agent.Name+" forgets "+address, func() error {
			got, err := balancerServers(agent.DataDir)
			if err != nil || slices.Contains(got, address) {
				return fmt.Errorf("its load balancer knows %v (%v)", got, err)
			}
			return nil
		})
	}
}

// testBundleSealed reads, with the admin's rights (more than any kube-system
// reader has), every Secret and ConfigMap of kube-system, and tries each
// value, every join token's secret and a fresh agent token as the key of
// the sealed bundle of CA keys: none opens it; the server token does (the
// positive control). No bundle sealed with a join token's secret is left.
func (m *multiCluster) testBundleSealed(ctx context.Context, t *testing.T) {
	s1 := m.h.Server(1)
	cm, err := m.client(1).CoreV1().ConfigMaps("kube-system").Get(ctx, join.ServerBootstrapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sealed []string
	for k, v := range cm.Data {
		switch {
		case strings.HasPrefix(k, "bundle."):
			sealed = append(sealed, v)
		case strings.HasPrefix(k, "token."):
			t.Errorf("%s/%s still holds %s, a bundle sealed with a join token's secret", cm.Namespace, cm.Name, k)
		}
	}
	if len(sealed) != 1 {
		t.Fatalf("%d sealed bundles published, want 1", len(sealed))
	}
	candidates := []string{}
	secrets, err := m.client(1).CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		for _, v := range s.Data {
			candidates = append(candidates, string(v))
		}
		if id, secret := s.Data["token-id"], s.Data["token-secret"]; id != nil {
			candidates = append(candidates, string(id)+"."+string(secret))
		}
	}
	cms, err := m.client(1).CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		for _, v := range c.Data {
			candidates = append(candidates, v)
		}
	}
	for _, f := range []string{s1.TokenFile()} {
		data, _ := os.ReadFile(f)
		tok, err := pki.ParseToken(string(data))
		if err != nil {
			t.Fatal(err)
		}
		candidates = append(candidates, tok.Secret, tok.String())
	}
	for _, c := range candidates {
		if _, err := serverbundle.Open([]byte(sealed[0]), c); err == nil {
			t.Fatalf("a value readable in kube-system (%d bytes) opens the bundle of CA keys", len(c))
		}
	}
	data, _ := os.ReadFile(s1.ServerTokenFile())
	server, err := pki.ParseToken(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serverbundle.Open([]byte(sealed[0]), server.Seal); err != nil {
		t.Errorf("the server token does not open the bundle: %v", err)
	}
}

// testRotation rotates the tokens on server 1: a server joining with the
// old server token is refused, and nothing of the cluster lands in its
// data directory. It returns the old server token.
func (m *multiCluster) testRotation(ctx context.Context, t *testing.T, dataRoot string) string {
	s1 := m.h.Server(1)
	old, err := os.ReadFile(s1.ServerTokenFile())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, m.k1m, "token", "rotate", "--data-dir", s1.DataDir, "--kubeconfig", s1.AdminKubeconfig()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "new server token written to "+s1.ServerTokenFile()) {
		t.Fatalf("k1m token rotate: %v\n%s", err, out)
	}
	now, _ := os.ReadFile(s1.ServerTokenFile())
	if string(now) == string(old) {
		t.Fatal("DATA-DIR/server-token did not change")
	}
	dir := filepath.Join(dataRoot, "rotated-out-server")
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, m.k1m, "server", "--server", s1.URL(), "--data-dir", dir, "--disable-agent", "--node-name", "k1m-server-rotated-out")
	cmd.Env = append(os.Environ(), "K1M_TOKEN="+strings.TrimSpace(string(old)))
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), failedPrefix+"--token: ") {
		t.Errorf("a server joining with the rotated-out server token: %v\n%s\nwant a --token refusal", err, tail(out))
	}
	if _, err := os.Stat(filepath.Join(dir, "tls", "ca.key")); err == nil {
		t.Error("the rotated-out server token still obtained the cluster's CA key")
	}
	return strings.TrimSpace(string(old))
}

// requireRotationFollowed checks that server 2, which was not where the
// tokens were rotated and was not restarted for it, no longer keeps the old
// server token and keeps the new join token.
func (m *multiCluster) requireRotationFollowed(ctx context.Context, t *testing.T, old string) {
	s1, s2 := m.h.Server(1), m.h.Server(2)
	want, _ := os.ReadFile(s1.TokenFile())
	testutil.Eventually(t, 2*time.Minute, "server 2 following the rotation", func() error {
		if data, err := os.ReadFile(s2.ServerTokenFile()); err == nil {
			if strings.TrimSpace(string(data)) == old {
				return fmt.Errorf("%s still holds the old server token", s2.ServerTokenFile())
			}
			return fmt.Errorf("%s holds a server token it cannot have (%v)", s2.ServerTokenFile(), err)
		}
		if got, _ := os.ReadFile(s2.TokenFile()); string(got) != string(want) {
			return fmt.Errorf("%s holds %q, server 1 %q", s2.TokenFile(), got, want)
		}
		return nil
	})
}
