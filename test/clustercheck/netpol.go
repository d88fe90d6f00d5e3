package clustercheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"k1m.dev/k1m/pkg/testutil"
)

// NetworkPolicy wants NetworkPolicies enforced: a web pod on the first
// backend node answers a client on the client node; under a deny-all
// ingress policy it no longer does; a policy allowing pods labelled as
// clients on the web port lets the client through again.
func NetworkPolicy(ctx context.Context, t *testing.T, c Cluster, l Layout) {
	t.Helper()
	ns := l.Namespace
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer c.Client().CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
	pod := func(name, node string, labels map[string]string, script string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64),
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "sh", Image: l.Image, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", script}}}},
		}
	}
	web := pod("web", l.BackendNodes[0], map[string]string{"app": "web"}, "mkdir -p /www && echo web > /www/index.html && exec httpd -f -p [::]:8080 -h /www")
	client := pod("client", l.ClientNode, map[string]string{"role": "client"}, "exec sleep 3600")
	for _, p := range []*corev1.Pod{web, client} {
		if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var webIP string
	testutil.Eventually(t, 2*time.Minute, "the web and client pods running", func() error {
		for _, name := range []string{"web", "client"} {
			got, err := c.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != corev1.PodRunning || got.Status.PodIP == "" {
				return fmt.Errorf("pod %s is %s", name, got.Status.Phase)
			}
			if name == "web" {
				webIP = got.Status.PodIP
			}
		}
		return nil
	})
	wantFetch := func(allowed bool, why string) {
		t.Helper()
		what := fmt.Sprintf("the client's fetch from the web pod refused (%s)", why)
		if allowed {
			what = fmt.Sprintf("the client's fetch from the web pod answered (%s)", why)
		}
		// Twice in a row: the rules reach the nodes within seconds.
		streak := 0
		testutil.Eventually(t, time.Minute, what, func() error {
			out, err := c.Kubectl("exec", "-n", ns, "client", "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 `+webIP+` 8080`)
			if ok := err == nil && strings.HasSuffix(strings.TrimSpace(out), "web"); ok != allowed {
				streak = 0
				return fmt.Errorf("fetch: %v: %q", err, out)
			}
			if streak++; streak < 2 {
				return fmt.Errorf("%d in a row so far", streak)
			}
			return nil
		})
	}
	apply := func(np *networkingv1.NetworkPolicy) {
		t.Helper()
		if _, err := c.Client().NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wantFetch(true, "before any policy")
	apply(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}})
	wantFetch(false, "under deny-all ingress")
	port := intstr.FromInt32(8080)
	apply(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-clients", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		}})
	wantFetch(true, "allowed from pods labelled as clients")
}
