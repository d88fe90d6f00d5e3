package integration

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/testutil"
)

// The NetworkPolicy test's namespaces and pods: a web pod (HTTP on 8080,
// a line server on 9000) on the first agent's node; a client in its
// namespace on the second agent's node, and one in another namespace on
// the web pod's own node (the bridge path).
const (
	npNamespace        = "netpol"
	npFriendsNamespace = "netpol-friends"
	npFriendsLabel     = "k1m.dev/netpol-test"
)

type netpolPods struct {
	c                *cluster
	webIP            string
	sameNS, otherNS  string // the clients' namespaces
	sameNode         string // the web pod's node
	client, neighbor string // the clients' names
}

// testNetworkPolicy: policies applied, then changed, each checked from
// both clients (a refused fetch times out: the packets are dropped):
// none (both fetch); deny-all ingress (neither); that plus allow from the
// friends namespace (only the neighbor); an egress policy on the neighbor
// allowing only DNS (the neighbor no longer fetches). And a connection
// open before the deny-all stays open (conntrack's established flows
// pass), while new ones are refused.
func testNetworkPolicy(ctx context.Context, t *testing.T, c *cluster) {
	p := startNetpolPods(ctx, t, c)
	p.wantFetch(t, p.sameNS, p.client, true, "before any policy")
	p.wantFetch(t, p.otherNS, p.neighbor, true, "before any policy")

	// An open connection from the neighbor: a line a second into the web
	// pod's line server, which counts them.
	open := exec.Command(c.k1m, "kubectl", "--kubeconfig", c.adminKubeconfig(), "exec", "-n", p.otherNS, p.neighbor, "--",
		"sh", "-c", "while :; do echo line; sleep 1; done | nc "+p.webIP+" 9000")
	if err := open.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { open.Process.Kill(); open.Wait() }()
	p.waitLines(ctx, t, 3, "the open connection's lines before any policy")

	p.apply(ctx, t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: npNamespace},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}})
	p.wantFetch(t, p.sameNS, p.client, false, "under deny-all ingress")
	p.wantFetch(t, p.otherNS, p.neighbor, false, "under deny-all ingress")
	// The connection opened before the policy still delivers.
	p.waitLines(ctx, t, p.lines(ctx, t)+3, "the connection opened before deny-all, still delivering")

	port := intstr.FromInt32(8080)
	p.apply(ctx, t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-friends", Namespace: npNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{npFriendsLabel: "friends"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		}})
	p.wantFetch(t, p.otherNS, p.neighbor, true, "allowed from its namespace")
	p.wantFetch(t, p.sameNS, p.client, false, "still denied, its namespace not allowed")

	udp := corev1.ProtocolUDP
	dns := intstr.FromInt32(53)
	p.apply(ctx, t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dns-only", Namespace: npFriendsNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}}}},
		}})
	p.wantFetch(t, p.otherNS, p.neighbor, false, "its own egress policy allowing DNS only")

	for _, ns := range []string{npNamespace, npFriendsNamespace} {
		c.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
}

func startNetpolPods(ctx context.Context, t *testing.T, c *cluster) *netpolPods {
	h := c.harness(t)
	web, other := h.Agent(1).Name, h.Agent(2).Name
	p := &netpolPods{c: c, sameNS: npNamespace, otherNS: npFriendsNamespace, sameNode: web, client: "client", neighbor: "neighbor"}
	for ns, labels := range map[string]map[string]string{npNamespace: nil, npFriendsNamespace: {npFriendsLabel: "friends"}} {
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := []*corev1.Pod{
		netpolPod(npNamespace, "web", web, map[string]string{"app": "web"},
			// busybox's nc serves one connection, and ends it when its own
			// stdin ends: sleep holds that open.
			"mkdir -p /www && echo web > /www/index.html && { sleep 3600 | nc -l -p 9000 > /www/lines & } && exec httpd -f -p [::]:8080 -h /www"),
		netpolPod(npNamespace, p.client, other, nil, "exec sleep 3600"),
		netpolPod(npFriendsNamespace, p.neighbor, web, nil, "exec sleep 3600"),
	}
	for _, pod := range pods {
		if _, err := c.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 2*time.Minute, "the web pod and both clients running", func() error {
		for _, pod := range pods {
			got, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != corev1.PodRunning || got.Status.PodIP == "" {
				return fmt.Errorf("pod %s/%s is %s", pod.Namespace, pod.Name, got.Status.Phase)
			}
			if pod.Name == "web" {
				p.webIP = got.Status.PodIP
			}
		}
		return nil
	})
	return p
}

func netpolPod(ns, name, node string, labels map[string]string, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{
			Name: "sh", Image: airgap.BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", script},
		}}},
	}
}

func (p *netpolPods) apply(ctx context.Context, t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	if _, err := p.c.client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fetch asks the web pod for its page from a client, with a 2 s connect
// timeout.
func (p *netpolPods) fetch(ns, pod string) (string, error) {
	out, err := p.c.kubectl("exec", "-n", ns, pod, "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 `+p.webIP+` 8080`)
	return strings.TrimSpace(out), err
}

// wantFetch waits for the client's fetch to succeed (allowed) or fail
// (refused) twice in a row: the rules reach the nodes within a few
// seconds of a change.
func (p *netpolPods) wantFetch(t *testing.T, ns, pod string, allowed bool, why string) {
	t.Helper()
	what := fmt.Sprintf("%s/%s's fetch from the web pod refused (%s)", ns, pod, why)
	if allowed {
		what = fmt.Sprintf("%s/%s's fetch from the web pod answered (%s)", ns, pod, why)
	}
	streak := 0
	testutil.Eventually(t, time.Minute, what, func() error {
		out, err := p.fetch(ns, pod)
		ok := err == nil && strings.HasSuffix(out, "web")
		if ok != allowed {
			streak = 0
			return fmt.Errorf("fetch: %v: %q", err, out)
		}
		if streak++; streak < 2 {
			return fmt.Errorf("%d in a row so far", streak)
		}
		return nil
	})
}

// lines counts the lines the web pod's line server received.
func (p *netpolPods) lines(ctx context.Context, t *testing.T) int {
	out, err := p.c.kubectl("exec", "-n", npNamespace, "web", "--", "sh", "-c", "wc -l < /www/lines")
	if err != nil {
		t.Fatalf("counting the line server's lines: %v: %s", err, out)
	}
	var n int
	fmt.Sscan(strings.TrimSpace(out), &n)
	return n
}

func (p *netpolPods) waitLines(ctx context.Context, t *testing.T, want int, what string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s (%d lines)", what, want), func() error {
		if got := p.lines(ctx, t); got < want {
			return fmt.Errorf("%d lines", got)
		}
		return nil
	})
}
