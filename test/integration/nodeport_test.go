package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
)

// testNodePortEveryNode reaches each agent's web pod through a NodePort
// Service that selects only that pod, from a client on the same agent, at
// every node's address. The server's address is the case that used to
// fail: the server DNATs the packet back towards the node it came from, the
// bridge joining the nodes (test/localcluster) forwards it as a bridged frame
// and, without hairpin on the port, drops it. Conformance's "session
// affinity work for NodePort service" failed whenever it picked that pair.
// Runs after testServiceAcrossNodes, which leaves one web pod per agent.
func testNodePortEveryNode(ctx context.Context, t *testing.T, c *cluster) {
	backends, err := c.client.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(backends.Items) == 0 {
		t.Fatal("no web pods (PodsAcrossNodesServiceAndDNS failed?)")
	}
	addrs := nodeAddresses(ctx, t, c)
	for _, b := range backends.Items {
		nodePort := pinnedNodePortService(ctx, t, c, b)
		client := "client-" + b.Spec.NodeName
		startClient(ctx, t, c, client, b.Spec.NodeName)
		for node, addr := range addrs {
			what := fmt.Sprintf("client on %s reaches its own node's pod %s via NodePort %d on %s (%s)", b.Spec.NodeName, b.Name, nodePort, node, addr)
			testutil.Eventually(t, time.Minute, what, func() error {
				return clustercheck.ExpectBody(c, testNamespace, client, addr, strconv.Itoa(int(nodePort)), b.Name)
			})
		}
	}
}

// pinnedNodePortService labels pod b and creates a NodePort Service that
// selects b alone, so every connection must reach b.
func pinnedNodePortService(ctx context.Context, t *testing.T, c *cluster, b corev1.Pod) int32 {
	patch := []byte(`{"metadata":{"labels":{"pin":"` + b.Name + `"}}}`)
	if _, err := c.client.CoreV1().Pods(testNamespace).Patch(ctx, b.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "pin-" + b.Spec.NodeName, Namespace: testNamespace},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "web", "pin": b.Name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	svc, err := c.client.CoreV1().Services(testNamespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.Ports[0].NodePort
}

func startClient(ctx context.Context, t *testing.T, c *cluster, name, node string) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "sh", Image: busybox, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}},
		},
	}
	if _, err := c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, "pod "+name+" running on "+node, func() error {
		p, err := c.client.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s is %s", name, p.Status.Phase)
		}
		return nil
	})
}

// nodeAddresses maps each node to its InternalIP.
func nodeAddresses(ctx context.Context, t *testing.T, c *cluster) map[string]string {
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, n := range list.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				addrs[n.Name] = a.Address
			}
		}
	}
	if len(addrs) != nodes {
		t.Fatalf("InternalIP of %d nodes (%v), want %d", len(addrs), addrs, nodes)
	}
	return addrs
}
