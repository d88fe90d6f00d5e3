package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/join"
)

// ErrRestart is returned by Run when the node agent stopped its
// components so that it can start again with the cluster's new lease
// profile: the kubelet reads its renew interval only at start. The command
// layer starts the agent again in the same process (exec); pods keep
// running, as across any agent restart.
var ErrRestart = errors.New("the node agent restarts to apply the cluster's new lease profile")

func sameLeaseProfile(a, b join.Settings) bool {
	return a.RenewInterval == b.RenewInterval && a.LeaseDurationSeconds == b.LeaseDurationSeconds
}

func describeLease(s join.Settings) string {
	return fmt.Sprintf("renew %s, lease %ds", s.RenewInterval, s.LeaseDurationSeconds)
}

// watchSettings reads the cluster's settings every interval and sends the
// first whose lease profile differs from running; read errors (a server
// restarting) are retried at the next tick.
func watchSettings(ctx context.Context, read func(context.Context) (join.Settings, error), running join.Settings, interval time.Duration) <-chan join.Settings {
	changed := make(chan join.Settings, 1)
	ctx, found := context.WithCancel(ctx)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if s, err := read(ctx); err == nil && !sameLeaseProfile(s, running) {
			changed <- s
			found() // one change is all the agent acts on: it restarts
		}
	}, interval)
	return changed
}

// annotateNode records on the node, once its kubelet registered it, the
// renew interval that kubelet runs with (a merge patch of one annotation,
// which the Node authorizer and NodeRestriction allow a node on itself).
func annotateNode(ctx context.Context, client kubernetes.Interface, nodeName string, renew time.Duration) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{constants.NodeRenewIntervalAnnotation: renew.String()}}})
	if err != nil {
		return err
	}
	for {
		_, err := client.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("annotating node %s with its renew interval: %w", nodeName, err)
		case <-time.After(2 * time.Second):
		}
	}
}
