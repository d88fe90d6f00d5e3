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
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/test/testutil"
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
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
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
	t.Run("EventsAndLeasesInNoFsyncEtcd", func(t *testing.T) { testEtcdSplit(t, c) })
	t.Run("APIServerTuningAndWatchCache", func(t *testing.T) { testAPIServer(ctx, t, c) })
}

func testNodes(ctx context.Context, t *testing.T, c *cluster) {
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if !ready(&n) {
			t.Errorf("node %s not Ready", n.Name)
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip := net.ParseIP(a.Address); ip == nil || ip.To4() != nil {
					t.Errorf("node %s InternalIP %s, want IPv6 only", n.Name, a.Address)
				}
			}
		}
		for _, cidr := range n.Spec.PodCIDRs {
			if _, r, err := net.ParseCIDR(cidr); err != nil || r.IP.To4() != nil {
				t.Errorf("node %s pod range %s, want IPv6", n.Name, cidr)
			}
		}
		if v := n.Status.NodeInfo.KubeletVersion; !strings.Contains(v, "+k1m.") {
			t.Errorf("node %s kubelet %s, want the k1m build (v1.32.5+k1m.<commit>)", n.Name, v)
		}
	}
}

func ready(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
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

func testServiceAcrossNodes(ctx context.Context, t *testing.T, c *cluster) {
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	for _, w := range c.workers {
		web := pod("web-"+w, w, labels, "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p [::]:8080 -h /www")
		if _, err := c.client.CoreV1().Pods(namespace).Create(ctx, web, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client := pod("client", c.controlPlane, nil, "exec sleep 3600")
	client.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if _, err := c.client.CoreV1().Pods(namespace).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var backends []corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "a web pod running on each worker and the client on the control plane", func() error {
		pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		backends = nil
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s on %s is %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
			if p.Labels["app"] == "web" {
				backends = append(backends, p)
			}
		}
		if len(backends) != len(c.workers) {
			return fmt.Errorf("%d web pods running", len(backends))
		}
		return nil
	})
	for _, b := range backends {
		if ip := net.ParseIP(b.Status.PodIP); ip == nil || ip.To4() != nil {
			t.Errorf("pod %s IP %q, want IPv6", b.Name, b.Status.PodIP)
		}
		testutil.Eventually(t, time.Minute, "the client fetches "+b.Name+" at ["+b.Status.PodIP+"]:8080 across nodes", func() error {
			return c.expectBody("["+b.Status.PodIP+"]:8080", b.Name)
		})
	}
	name := "web." + namespace + ".svc.cluster.local"
	testutil.Eventually(t, time.Minute, "CoreDNS answers AAAA "+svc.Spec.ClusterIP+" for "+name, func() error {
		out, err := c.kubectl("exec", "-n", namespace, "client", "--", "nslookup", "-type=AAAA", name)
		if err != nil || !strings.Contains(out, svc.Spec.ClusterIP) {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	served := map[string]bool{}
	testutil.Eventually(t, 2*time.Minute, "the Service, by its IPv6 ClusterIP, reaches the pods of both workers", func() error {
		out, err := c.fetch("[" + svc.Spec.ClusterIP + "]:80")
		if err != nil {
			return err
		}
		served[lastLine(out)] = true
		if len(served) < len(c.workers) {
			return fmt.Errorf("served so far by %v", served)
		}
		return nil
	})
}

func pod(name, node string, labels map[string]string, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "sh", Image: busybox, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", script},
		}}},
	}
}

// fetch gets / from addr in the client pod with busybox nc (Debian's
// static busybox wget crashes).
func (c *cluster) fetch(addr string) (string, error) {
	host, port, _ := net.SplitHostPort(addr)
	out, err := c.kubectl("exec", "-n", namespace, "client", "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+host+` `+port)
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	return out, nil
}

func (c *cluster) expectBody(addr, body string) error {
	out, err := c.fetch(addr)
	if err == nil && lastLine(out) != body {
		err = fmt.Errorf("body %q, want %q", lastLine(out), body)
	}
	return err
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

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// testEtcdSplit counts keys in both etcds from inside the control-plane
// node (they listen on its loopback), through etcd's JSON gateway with
// kube-apiserver's etcd client certificate.
func testEtcdSplit(t *testing.T, c *cluster) {
	count := func(url, prefix string) int {
		end := []byte(prefix)
		end[len(end)-1]++
		body, _ := json.Marshal(map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(prefix)),
			"range_end": base64.StdEncoding.EncodeToString(end), "count_only": true})
		out, err := exec.Command("docker", "exec", c.controlPlane, "curl", "-sS", "--fail",
			"--cacert", "/etc/kubernetes/pki/etcd/ca.crt",
			"--cert", "/etc/kubernetes/pki/apiserver-etcd-client.crt", "--key", "/etc/kubernetes/pki/apiserver-etcd-client.key",
			url+"/v3/kv/range", "-d", string(body)).CombinedOutput()
		if err != nil {
			t.Fatalf("counting %s in %s: %v: %s", prefix, url, err, out)
		}
		var resp struct {
			Count string `json:"count"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("etcd answer %s: %v", out, err)
		}
		var n int
		fmt.Sscan(resp.Count, &n)
		return n
	}
	const durable, noFsync = "https://[::1]:2379", "https://[::1]:2479"
	for _, prefix := range []string{"/registry/leases/kube-node-lease/", "/registry/events/"} {
		if n := count(noFsync, prefix); n == 0 {
			t.Errorf("no %s keys in the no-fsync etcd", prefix)
		}
		if n := count(durable, prefix); n != 0 {
			t.Errorf("%d %s keys in kubeadm's durable etcd, want none", n, prefix)
		}
	}
	for _, prefix := range []string{"/registry/pods/", "/registry/minions/"} {
		if n := count(durable, prefix); n == 0 {
			t.Errorf("no %s keys in the durable etcd", prefix)
		}
		if n := count(noFsync, prefix); n != 0 {
			t.Errorf("%d %s keys in the no-fsync etcd, want none", n, prefix)
		}
	}
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
