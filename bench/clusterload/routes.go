package clusterload

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/podnet"
)

// RouteTimeout bounds the wait for every Node's route after a join burst:
// at 5 routes a second (the publisher's floor) 2,000 routes take 400 s.
const RouteTimeout = 15 * time.Minute

// routeProgressEvery is how often the wait for the routes says how many
// are there.
const routeProgressEvery = 30 * time.Second

// nodeCount counts the Nodes by a list of one (the rest's count from
// etcd).
func nodeCount(ctx context.Context, client kubernetes.Interface) (int64, error) {
	nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("counting the Nodes: %w", err)
	}
	return listedCount(len(nl.Items), nl.RemainingItemCount), nil
}

// routeInformer keeps the route ConfigMaps the publisher wrote, as a
// node's watch does: a list with a label selector gives no count of the
// rest, so counting them by lists would list them all each time.
func routeInformer(client kubernetes.Interface) cache.SharedIndexInformer {
	lw := cache.NewFilteredListWatchFromClient(client.CoreV1().RESTClient(), "configmaps", podnet.RoutesNamespace, podnet.RouteSelector)
	return cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
}

// listedCount is a list's items and the count of those left after them.
func listedCount(items int, remaining *int64) int64 {
	if remaining == nil {
		return int64(items)
	}
	return int64(items) + *remaining
}

// waitRouted returns once the route publisher has written a route for
// every Node; published is false when it writes none (--pod-routes=provider:
// no route at all once the servers' own nodes are there).
func waitRouted(ctx context.Context, client kubernetes.Interface, progress func(string)) (published bool, err error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	routes := routeInformer(client)
	go routes.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), routes.HasSynced) {
		return false, fmt.Errorf("listing the pod routes: %w", ctx.Err())
	}
	deadline := time.Now().Add(RouteTimeout)
	said := time.Now()
	for {
		nodes, err := nodeCount(ctx, client)
		routed := int64(len(routes.GetStore().ListKeys()))
		switch {
		case err != nil:
			return false, err
		case routed == 0:
			return false, nil
		case routed >= nodes:
			return true, nil
		case time.Now().After(deadline):
			return true, fmt.Errorf("waited %s for every Node's pod route: %d routes for %d Nodes", RouteTimeout, routed, nodes)
		case time.Since(said) >= routeProgressEvery:
			progress(fmt.Sprintf("the pod routes: %d of %d Nodes routed", routed, nodes))
			said = time.Now()
		}
		if err := clock.Sleep(ctx, time.Second); err != nil {
			return true, err
		}
	}
}
