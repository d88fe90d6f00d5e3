package server

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/poll"
)

// ControlPlaneLabel marks a server's node, as k3s and kubeadm mark
// theirs: `kubectl get nodes` shows its ROLES as control-plane. A node
// may not set a node-role label on itself (NodeRestriction), so the
// server sets it with its own client once its node has registered.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// controlPlaneLabelWait bounds the wait for the server's node to register.
const controlPlaneLabelWait = 10 * time.Minute

// labelControlPlane labels the server's own node ControlPlaneLabel=true:
// a GET every 2 s until the Node exists (a few at a start), then one
// PATCH unless it is labelled already.
func (s *Server) labelControlPlane(ctx context.Context, client kubernetes.Interface) {
	err := poll.Until(ctx, 2*time.Second, controlPlaneLabelWait, "node "+s.nodeName+" registered", func(ctx context.Context) error {
		return ensureLabel(ctx, client, s.nodeName, ControlPlaneLabel, "true")
	})
	if err != nil && ctx.Err() == nil {
		s.step("node %s not labelled %s: %v", s.nodeName, ControlPlaneLabel, err)
	}
}

// ensureLabel sets label key=value on Node name unless it has it.
func ensureLabel(ctx context.Context, client kubernetes.Interface, name, key, value string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got, ok := node.Labels[key]; ok && got == value {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}
