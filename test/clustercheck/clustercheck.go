// Package clustercheck holds the checks every k1m cluster must pass,
// whoever made it (k1m server and agents in test/integration, a kind
// cluster from the node image in test/kind), the way the e2e framework's
// checks run against any cluster: the test gives a small Cluster and a
// Layout, the checks do the rest through the API, kubectl and etcd.
package clustercheck

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/testutil"
)

// Store names one of a cluster's two etcds.
type Store string

// The two stores of every k1m cluster.
const (
	Durable Store = "durable"  // everything but Events and Leases, fsync on
	NoFsync Store = "no-fsync" // Events and Leases (constants.NoFsyncResources)
)

// Cluster is what the checks need from a cluster.
type Cluster interface {
	Client() kubernetes.Interface
	// Kubectl runs kubectl against the cluster, output and error combined.
	Kubectl(args ...string) (string, error)
	// CountKeys counts the keys under prefix in one of the etcds.
	CountKeys(ctx context.Context, store Store, prefix string) (int64, error)
}

// Layout says where the checks put their pods.
type Layout struct {
	Namespace string
	Image     string // a busybox with sh, httpd, nc and nslookup, never pulled
	// ClientNode runs the client pod (a control-plane node: the client
	// tolerates every taint); BackendNodes run one web pod each.
	ClientNode   string
	BackendNodes []string
}

// Nodes wants want nodes, every one Ready, with IPv6 addresses only and
// one IPv6 /64 pod range, and an IPv6 kubernetes Service.
func Nodes(ctx context.Context, t *testing.T, c Cluster, want int) {
	list, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != want {
		t.Fatalf("%d nodes, want %d", len(list.Items), want)
	}
	for _, n := range list.Items {
		if !Ready(&n) {
			t.Errorf("node %s not Ready", n.Name)
		}
		for _, a := range n.Status.Addresses {
			if ip := net.ParseIP(a.Address); ip != nil && ip.To4() != nil {
				t.Errorf("node %s has an IPv4 address %s", n.Name, a.Address)
			}
		}
		if len(n.Spec.PodCIDRs) != 1 {
			t.Errorf("node %s pod ranges %v, want one IPv6 /64", n.Name, n.Spec.PodCIDRs)
		}
		for _, cidr := range n.Spec.PodCIDRs {
			if _, r, err := net.ParseCIDR(cidr); err != nil || r.IP.To4() != nil || !strings.HasSuffix(cidr, "/64") {
				t.Errorf("node %s pod range %s, want an IPv6 /64", n.Name, cidr)
			}
		}
	}
	svc, err := c.Client().CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil || ip.To4() != nil {
		t.Errorf("kubernetes Service IP %s, want IPv6", svc.Spec.ClusterIP)
	}
}

// Ready tells whether a node reports Ready.
func Ready(n *corev1.Node) bool {
	cond := ReadyCondition(n)
	return cond != nil && cond.Status == corev1.ConditionTrue
}

// ReadyCondition is the node's Ready condition, nil if it has none yet.
func ReadyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// WebLabels select the web pods ServiceAcrossNodes leaves running.
var WebLabels = map[string]string{"app": "web"}

// ClientPod is the name of the client pod ServiceAcrossNodes leaves running.
const ClientPod = "client"

// ServiceAcrossNodes runs a web pod on each backend node and a client on
// the client node, then wants from the client: every pod IP IPv6 and
// reached across nodes, CoreDNS answering AAAA with the Service's IP, and
// the Service, resolved by name, reaching every backend.
func ServiceAcrossNodes(ctx context.Context, t *testing.T, c Cluster, l Layout) {
	client := c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, node := range l.BackendNodes {
		web := l.pod("web-"+node, node, WebLabels, "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p [::]:8080 -h /www")
		if _, err := client.CoreV1().Pods(l.Namespace).Create(ctx, web, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clientPod := l.pod(ClientPod, l.ClientNode, nil, "exec sleep 3600")
	clientPod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if _, err := client.CoreV1().Pods(l.Namespace).Create(ctx, clientPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services(l.Namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: l.Namespace},
		Spec:       corev1.ServiceSpec{Selector: WebLabels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	backends := waitRunning(ctx, t, c, l)
	for _, b := range backends {
		if ip := net.ParseIP(b.Status.PodIP); ip == nil || ip.To4() != nil {
			t.Errorf("pod %s IP %q, want IPv6", b.Name, b.Status.PodIP)
		}
		testutil.Eventually(t, time.Minute, "the client fetches "+b.Name+" at ["+b.Status.PodIP+"]:8080 across nodes", func() error {
			return ExpectBody(c, l.Namespace, ClientPod, b.Status.PodIP, "8080", b.Name)
		})
	}
	name := "web." + l.Namespace + ".svc.cluster.local"
	testutil.Eventually(t, time.Minute, "CoreDNS answers AAAA "+svc.Spec.ClusterIP+" for "+name, func() error {
		out, err := c.Kubectl("exec", "-n", l.Namespace, ClientPod, "--", "nslookup", "-type=AAAA", name)
		if err != nil || !strings.Contains(out, svc.Spec.ClusterIP) {
			return fmt.Errorf("want %s in the answer: %v: %s", svc.Spec.ClusterIP, err, out)
		}
		return nil
	})
	served := map[string]bool{}
	testutil.Eventually(t, 2*time.Minute, "the Service, resolved by name, reaches the pods of every backend node", func() error {
		// busybox's nc does not resolve names (static glibc): resolve with
		// nslookup (CoreDNS, AAAA), then connect to the answer.
		script := `ip=$(nslookup -type=AAAA ` + name + ` | awk '/^Name:/ {n=1} n && /^Address:/ {print $2}' | tail -1); ` +
			`[ -n "$ip" ] || exit 3; printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 "$ip" 80`
		out, err := c.Kubectl("exec", "-n", l.Namespace, ClientPod, "--", "sh", "-c", script)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		served[LastLine(out)] = true
		if len(served) < len(l.BackendNodes) || served[""] {
			return fmt.Errorf("served so far by %v", served)
		}
		return nil
	})
}

// waitRunning waits for every pod of the namespace to run and returns
// the web pods, one on each backend node.
func waitRunning(ctx context.Context, t *testing.T, c Cluster, l Layout) []corev1.Pod {
	var backends []corev1.Pod
	testutil.Eventually(t, 3*time.Minute, "a web pod running on each backend node and the client running", func() error {
		pods, err := c.Client().CoreV1().Pods(l.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		backends = nil
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s on %s is %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
			if p.Labels["app"] == WebLabels["app"] {
				backends = append(backends, p)
			}
		}
		if len(backends) != len(l.BackendNodes) {
			return fmt.Errorf("%d web pods running, want %d", len(backends), len(l.BackendNodes))
		}
		return nil
	})
	return backends
}

func (l Layout) pod(name, node string, labels map[string]string, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Namespace, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "sh", Image: l.Image, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", script},
		}}},
	}
}

// ExpectBody fetches / from [ip]:port in pod client (busybox nc: Debian's
// static busybox wget crashes) and wants body as the last line.
func ExpectBody(c Cluster, namespace, client, ip, port, body string) error {
	out, err := c.Kubectl("exec", "-n", namespace, client, "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+ip+` `+port)
	if err != nil || LastLine(out) != body {
		return fmt.Errorf("want body %q: %v: %s", body, err, out)
	}
	return nil
}

// LastLine is the last non-empty line of s, trimmed.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// EtcdSplit wants Events and node Leases in the no-fsync etcd only, and
// Pods and Nodes (and ConfigMaps, if the cluster has some) in the durable
// one only.
func EtcdSplit(ctx context.Context, t *testing.T, c Cluster) {
	count := func(store Store, prefix string) int64 {
		n, err := c.CountKeys(ctx, store, prefix)
		if err != nil {
			t.Fatalf("counting %s in the %s etcd: %v", prefix, store, err)
		}
		return n
	}
	for _, prefix := range []string{"/registry/leases/kube-node-lease/", "/registry/events/"} {
		if n := count(NoFsync, prefix); n == 0 {
			t.Errorf("no %s keys in the no-fsync etcd", prefix)
		}
		if n := count(Durable, prefix); n != 0 {
			t.Errorf("%d %s keys in the durable etcd, want none", n, prefix)
		}
	}
	for _, prefix := range []string{"/registry/configmaps/", "/registry/pods/", "/registry/minions/"} {
		if n := count(Durable, prefix); n == 0 {
			t.Errorf("no %s keys in the durable etcd", prefix)
		}
		if n := count(NoFsync, prefix); n != 0 {
			t.Errorf("%d %s keys in the no-fsync etcd, want none", n, prefix)
		}
	}
}

// ControllerManagerLeader is the server whose kube-controller-manager
// leads now, numbered from 1 as in servers (their hostnames), and its
// identity. The controller-manager's identity is hostname_uuid, and the
// harness gives each server a hostname of its own (its name). The holder
// of the Lease must have renewed it within 6 s (a leader renews every
// 2 s, upstream's retry period; an older renewal is a holder's that lost
// it, and the Lease is about to move).
func ControllerManagerLeader(ctx context.Context, client kubernetes.Interface, servers []string) (int, string, error) {
	holder, err := freshLeaseHolder(ctx, client, "kube-controller-manager", 6*time.Second)
	if err != nil {
		return 0, "", err
	}
	host, _, _ := strings.Cut(holder, "_")
	if i := slices.Index(servers, host); i >= 0 {
		return i + 1, holder, nil
	}
	return 0, "", fmt.Errorf("the Lease kube-system/kube-controller-manager is held by %s, whose hostname %q is none of the servers' %q", holder, host, servers)
}

// freshLeaseHolder is the holder of the leader Lease kube-system/name, or
// an error while it has none or was last renewed longer than fresh ago.
func freshLeaseHolder(ctx context.Context, client kubernetes.Interface, name string, fresh time.Duration) (string, error) {
	lease, err := client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || lease.Spec.RenewTime == nil {
		return "", fmt.Errorf("the Lease kube-system/%s has no holder", name)
	}
	holder := *lease.Spec.HolderIdentity
	if age := time.Since(lease.Spec.RenewTime.Time); age > fresh {
		return "", fmt.Errorf("%s renewed the Lease kube-system/%s %s ago", holder, name, age.Round(time.Second))
	}
	return holder, nil
}

// LeaseRenewedSince waits for node's Lease renewed after since (a restart
// of its kubelet).
func LeaseRenewedSince(ctx context.Context, t *testing.T, client kubernetes.Interface, node string, since time.Time) {
	t.Helper()
	if err := WaitLeaseRenewed(ctx, client, node, since); err != nil {
		t.Fatal(err)
	}
}

// WaitLeaseRenewed is LeaseRenewedSince for callers without a *testing.T:
// it returns what it waited for and saw.
func WaitLeaseRenewed(ctx context.Context, client kubernetes.Interface, node string, since time.Time) error {
	return poll.Until(ctx, time.Second, 2*time.Minute, node+"'s Lease renewed after the restart", func(ctx context.Context) error {
		lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since) {
			return fmt.Errorf("renewed last at %v, the restart was at %v", lease.Spec.RenewTime, since)
		}
		return nil
	})
}
