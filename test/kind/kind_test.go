// Package kind checks a kind cluster made from the k1m node image
// (hack/kind.sh test, make kind-test) through the API and inside the
// control-plane node: IPv6-only nodes running the patched kubelet, the
// lease profile of manifests/kind/cluster.yaml on kubelets and
// controller-manager, pods on every worker, a Service and DNS over IPv6
// across nodes, Events and Leases in the no-fsync etcd only, the Go runtime
// tuning and the hashmap watch cache in kube-apiserver.
package kind

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/build/kindimage"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
)

// The lease profile manifests/kind/cluster.yaml sets.
const (
	renewInterval = 5 * time.Second
	leaseDuration = 20 * time.Second
	gracePeriod   = 25 * time.Second
	busybox       = "k1m.local/busybox:1.35" // kind load image-archive _output/images/busybox.tar
	namespace     = "k1m-kind-test"
)

type cluster struct {
	client       *kubernetes.Clientset
	kubeconfig   string
	controlPlane string // the control-plane node's container (and node) name
	workers      []string
}

func setup(t *testing.T) *cluster {
	kubeconfig := os.Getenv("K1M_KIND_KUBECONFIG")
	name := os.Getenv("K1M_KIND_NAME")
	if kubeconfig == "" || name == "" {
		t.Skip("K1M_KIND_KUBECONFIG and K1M_KIND_NAME unset: run through make kind-test (hack/kind.sh test)")
	}
	cfg, err := testutil.RESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{client: kubernetes.NewForConfigOrDie(cfg), kubeconfig: kubeconfig, controlPlane: name + "-control-plane",
		workers: []string{name + "-worker", name + "-worker2"}}
}

func TestKindCluster(t *testing.T) {
	c := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t.Run("NodesReadyIPv6Patched", func(t *testing.T) { testNodes(ctx, t, c) })
	t.Run("LeaseProfile", func(t *testing.T) { testLeaseProfile(ctx, t, c) })
	t.Run("ControllerManagerGracePeriod", func(t *testing.T) { testControllerManager(ctx, t, c) })
	t.Run("PodsOnWorkersServiceAndDNS", func(t *testing.T) { testServiceAcrossNodes(ctx, t, c) })
	t.Run("PersistentVolumesOnLocalPath", func(t *testing.T) { testPersistentVolumes(ctx, t, c) })
	t.Run("NetworkPolicyEnforced", func(t *testing.T) {
		clustercheck.NetworkPolicy(ctx, t, c, clustercheck.Layout{Namespace: namespace + "-netpol", Image: busybox,
			ClientNode: c.workers[1], BackendNodes: c.workers[:1]})
	})
	t.Run("EventsAndLeasesInNoFsyncEtcd", func(t *testing.T) { testEtcdSplit(ctx, t, c) })
	t.Run("APIServerTuningAndWatchCache", func(t *testing.T) { testAPIServer(ctx, t, c) })
	// Last: metrics-server's first samples come about a minute after the
	// cluster starts, which the checks above spend.
	t.Run("MetricsAPI", func(t *testing.T) { clustercheck.MetricsAPI(ctx, t, c) })
}

// testNodes runs the shared node checks, then wants the k1m kubelet on
// every node.
func testNodes(ctx context.Context, t *testing.T, c *cluster) {
	clustercheck.Nodes(ctx, t, c, 1+len(c.workers))
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if v := n.Status.NodeInfo.KubeletVersion; !strings.Contains(v, "+k1m.") {
			t.Errorf("node %s kubelet %s, want the k1m build (v1.32.5+k1m.<commit>)", n.Name, v)
		}
	}
}

// testLeaseProfile wants every node's Lease to last leaseDuration and to be
// renewed every renewInterval (renewTime, watched for 4 intervals).
func testLeaseProfile(ctx context.Context, t *testing.T, c *cluster) {
	seen := map[string][]time.Time{}
	for deadline := time.Now().Add(4*renewInterval + time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		list, err := c.client.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list.Items {
			if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != int32(leaseDuration/time.Second) {
				t.Fatalf("lease %s: leaseDurationSeconds %d, want %d", l.Name, got, int32(leaseDuration/time.Second))
			}
			if l.Spec.RenewTime == nil {
				continue
			}
			ts := seen[l.Name]
			if rt := l.Spec.RenewTime.Time; len(ts) == 0 || !rt.Equal(ts[len(ts)-1]) {
				seen[l.Name] = append(ts, rt)
			}
		}
	}
	if len(seen) != 3 {
		t.Fatalf("leases of %d nodes, want 3", len(seen))
	}
	for name, ts := range seen {
		if len(ts) < 3 {
			t.Errorf("lease %s renewed %d times in %s, want at least 3", name, len(ts), 4*renewInterval)
			continue
		}
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap < renewInterval-time.Second || gap > renewInterval+2*time.Second {
				t.Errorf("lease %s renewed after %s, want about %s", name, gap, renewInterval)
			}
		}
	}
}

// testControllerManager wants the patched controller-manager running with
// the lease duration the kubelets use and a grace period past it (it
// refuses to start otherwise).
func testControllerManager(ctx context.Context, t *testing.T, c *cluster) {
	pod, err := c.client.CoreV1().Pods("kube-system").Get(ctx, "kube-controller-manager-"+c.controlPlane, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(pod.Spec.Containers[0].Command, " ")
	for _, want := range []string{"--node-lease-duration=" + leaseDuration.String(), "--node-monitor-grace-period=" + gracePeriod.String()} {
		if !strings.Contains(args, want) {
			t.Errorf("kube-controller-manager lacks %s: %s", want, args)
		}
	}
	if pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].RestartCount > 0 {
		t.Errorf("kube-controller-manager is %s (restarts: %v)", pod.Status.Phase, pod.Status.ContainerStatuses)
	}
}

// testServiceAcrossNodes: a web pod on each worker, the client on the
// control plane (clustercheck.ServiceAcrossNodes).
func testServiceAcrossNodes(ctx context.Context, t *testing.T, c *cluster) {
	clustercheck.ServiceAcrossNodes(ctx, t, c, clustercheck.Layout{Namespace: namespace, Image: busybox,
		ClientNode: c.controlPlane, BackendNodes: c.workers})
}

// testPersistentVolumes: the node image's default StorageClass binds a
// claim per replica, one replica on each node, in kind's volume path; a
// replica keeps its data through its pod's deletion; deleted claims take
// their volumes with them (the provisioner deletes a volume only once its
// helper pod removed the directory).
func testPersistentVolumes(ctx context.Context, t *testing.T, c *cluster) {
	v := clustercheck.StartVolumes(ctx, t, c, namespace+"-volumes", busybox, 1+len(c.workers))
	for name, path := range v.VolumePaths(ctx, t) {
		if filepath.Dir(path) != kindimage.LocalStoragePath {
			t.Errorf("volume %s is at %s, want a directory of %s", name, path, kindimage.LocalStoragePath)
		}
	}
	v.DeletePod(ctx, t, 0)
	v.Delete(ctx, t)
}

func (c *cluster) Client() kubernetes.Interface { return c.client }

func (c *cluster) Kubectl(args ...string) (string, error) { return c.kubectl(args...) }

// CountKeys counts keys inside the control-plane node, where both etcds
// listen on loopback, through etcd's JSON gateway with kube-apiserver's
// etcd client certificate.
func (c *cluster) CountKeys(_ context.Context, store clustercheck.Store, prefix string) (int64, error) {
	url := map[clustercheck.Store]string{clustercheck.Durable: "https://[::1]:2379", clustercheck.NoFsync: "https://[::1]:2479"}[store]
	end := []byte(prefix)
	end[len(end)-1]++
	body, _ := json.Marshal(map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(end), "count_only": true})
	out, err := exec.Command("docker", "exec", c.controlPlane, "curl", "-sS", "--fail",
		"--cacert", "/etc/kubernetes/pki/etcd/ca.crt",
		"--cert", "/etc/kubernetes/pki/apiserver-etcd-client.crt", "--key", "/etc/kubernetes/pki/apiserver-etcd-client.key",
		url+"/v3/kv/range", "-d", string(body)).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	var resp struct {
		Count string `json:"count"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return 0, fmt.Errorf("etcd answer %s: %v", out, err)
	}
	var n int64
	fmt.Sscan(resp.Count, &n)
	return n, nil
}

func (c *cluster) kubectl(args ...string) (string, error) {
	out, err := exec.Command(kubectlPath(), append([]string{"--kubeconfig", c.kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

func kubectlPath() string {
	if p := os.Getenv("KUBECTL"); p != "" {
		return p
	}
	return "../../_output/bin/kubectl"
}

// testEtcdSplit runs the shared store checks, then wants the no-fsync
// etcd's static pod really without fsync.
func testEtcdSplit(ctx context.Context, t *testing.T, c *cluster) {
	clustercheck.EtcdSplit(ctx, t, c)
	out, err := exec.Command("docker", "exec", c.controlPlane, "cat", "/etc/kubernetes/manifests/etcd-nofsync.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--unsafe-no-fsync=true") {
		t.Errorf("the no-fsync etcd's manifest: %v: %s", err, out)
	}
}

// testAPIServer reads patch 0002's start-up line from kube-apiserver's log
// and the BtreeWatchCache gate from its metrics (locked off by patch 0001).
func testAPIServer(ctx context.Context, t *testing.T, c *cluster) {
	log, err := c.kubectl("logs", "-n", "kube-system", "kube-apiserver-"+c.controlPlane)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, `"Go runtime tuning"`) || !strings.Contains(log, "GOGC=800") {
		t.Errorf("kube-apiserver logged no Go runtime tuning with GOGC=800")
	}
	raw, err := c.client.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "kubernetes_feature_enabled{") && strings.Contains(line, `name="BtreeWatchCache"`) {
			if !strings.HasSuffix(line, " 0") {
				t.Errorf("BtreeWatchCache enabled: %s", line)
			}
			return
		}
	}
	t.Error("kube-apiserver reports no BtreeWatchCache gate in kubernetes_feature_enabled")
}
