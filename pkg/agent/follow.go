package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/kubeconfig"
)

// ErrRestart is returned by Run when the node agent stopped its
// components so that it can start again with the cluster's new lease
// profile: the kubelet reads its renew interval only at start. The command
// layer starts the agent again in the same process (exec); pods keep
// running, as across any agent restart.
var ErrRestart = errors.New("the node agent restarts to apply the cluster's new lease profile")

// connect makes the node's client, on its own certificate. On an agent
// it goes through the balancer, which through it follows the cluster's
// API servers.
func (n *node) connect(context.Context) error {
	restCfg, err := kubeconfig.RESTConfig(n.cfg.Paths.KubeletKubeconfig)
	if err != nil {
		return err
	}
	if n.client, err = kubernetes.NewForConfig(restCfg); err != nil {
		return err
	}
	if n.balancer != nil {
		n.balancer.Follow(n.balancerCtx, n.client)
	}
	return nil
}

// watch records the node's renew interval on its Node and, on an agent,
// watches for a new lease profile. The server's own node needs no watch:
// the server restarts to change the profile, and its node with it.
func (n *node) watch(ctx context.Context) error {
	annotated := make(chan error, 1)
	go func() { annotated <- annotateNode(ctx, n.client, n.cfg.NodeName, n.settings.RenewInterval) }()
	n.annotated = annotated
	if !n.cfg.Embedded {
		var removed func([]string)
		var spread func(time.Duration)
		if n.balancer != nil {
			removed, spread = n.balancer.SetRemoved, n.balancer.SetRebalanceSpread
			spread(n.settings.RebalanceSpread)
		}
		n.changed = watchSettings(ctx, n.client, n.settings, removed, spread)
	}
	return nil
}

// restartDelay is where in spread, r in [0, 1) picking it, this agent
// restarts for a new lease profile: the cluster's agents restart at
// random across the spread, not together.
func restartDelay(spread time.Duration, r float64) time.Duration {
	return time.Duration(float64(spread) * r)
}

func sameLeaseProfile(a, b join.Settings) bool {
	return a.RenewInterval == b.RenewInterval && a.LeaseDurationSeconds == b.LeaseDurationSeconds
}

func describeLease(s join.Settings) string {
	return fmt.Sprintf("renew %s, lease %ds", s.RenewInterval, s.LeaseDurationSeconds)
}

// watchSettings watches k1m-cluster (one object, by name, served from the
// watch cache: no request while nothing changes, where reading it every
// 30 s made 3,333 reads a second of the durable etcd at 100,000 nodes) and
// sends the first settings whose lease profile differs from running;
// settings that do not parse are ignored until they change again. Each
// version's removed servers go to removed and its rebalance spread to
// spread (nil: nowhere): the balancer forgets the servers and spreads its
// moves, with no request of its own.
func watchSettings(ctx context.Context, client kubernetes.Interface, running join.Settings, removed func([]string), spread func(time.Duration)) <-chan join.Settings {
	changed := make(chan join.Settings, 1)
	ctx, found := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(join.PublicNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", join.SettingsName).String()
		}))
	check := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != join.SettingsName {
			return
		}
		if removed != nil && ctx.Err() == nil {
			removed(join.RemovedServers(cm.Data))
		}
		s, err := join.SettingsFromData(cm.Data)
		if err == nil && spread != nil && ctx.Err() == nil {
			spread(s.RebalanceSpread)
		}
		if err != nil || sameLeaseProfile(s, running) || ctx.Err() != nil {
			return
		}
		select {
		case changed <- s:
			found() // one change is all the agent acts on: it restarts
		default:
		}
	}
	_, _ = factory.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	})
	factory.Start(ctx.Done())
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
