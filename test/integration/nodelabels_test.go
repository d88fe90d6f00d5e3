package integration

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
)

// The labels and taints TestCluster's harness starts its nodes with
// (--node-label, --node-taint): the server's node gets a label and a
// taint of its own, each agent a zone.
var (
	serverNodeFlags = []string{"--node-label=example.com/tier=control", "--node-taint=example.com/test=yes:PreferNoSchedule"}
	agentNodeFlags  = []string{"--node-label=topology.kubernetes.io/zone=zone-a"}
	serverTaint     = corev1.Taint{Key: "example.com/test", Value: "yes", Effect: corev1.TaintEffectPreferNoSchedule}
)

// testNodeLabelsAndTaints wants each node registered with its --node-label
// labels and --node-taint taints, and the server's node labelled a
// control-plane node (ROLES control-plane), the agents' not.
func testNodeLabelsAndTaints(ctx context.Context, t *testing.T, c *cluster) {
	serverNode := c.serverNode(ctx, t)
	testutil.Eventually(t, 30*time.Second, "the nodes' labels and taints", func() error {
		list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range list.Items {
			if err := checkNodeLabelsAndTaints(n, n.Name == serverNode); err != nil {
				return err
			}
		}
		return nil
	})
}

func checkNodeLabelsAndTaints(n corev1.Node, isServer bool) error {
	own := map[string]string{}
	for _, k := range []string{server.ControlPlaneLabel, "example.com/tier", "topology.kubernetes.io/zone"} {
		if v, ok := n.Labels[k]; ok {
			own[k] = v
		}
	}
	var taints []corev1.Taint
	for _, taint := range n.Spec.Taints {
		taints = append(taints, corev1.Taint{Key: taint.Key, Value: taint.Value, Effect: taint.Effect})
	}
	wantLabels := map[string]string{"topology.kubernetes.io/zone": "zone-a"}
	var wantTaints []corev1.Taint
	if isServer {
		wantLabels = map[string]string{server.ControlPlaneLabel: "true", "example.com/tier": "control"}
		wantTaints = []corev1.Taint{serverTaint}
	}
	if !maps.Equal(own, wantLabels) || !reflect.DeepEqual(taints, wantTaints) {
		return fmt.Errorf("node %s: labels %v, taints %v; want %v, %v", n.Name, own, taints, wantLabels, wantTaints)
	}
	return nil
}
