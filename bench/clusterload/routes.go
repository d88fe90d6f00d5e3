package clusterload

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/podnet"
)

// RouteTimeout bounds the wait for every Node's route after a join burst:
// at 5 routes a second (the publisher's floor) 2,000 routes take 400 s.
const RouteTimeout = 15 * time.Minute

// routeProgressEvery is how often the wait for the routes says how many
// are there.
const routeProgressEvery = 30 * time.Second

// routeCounts are the Nodes and the route ConfigMaps the publisher wrote,
// each counted by a list of one item (the rest's count from etcd).
func routeCounts(ctx context.Context, client kubernetes.Interface) (nodes, routes int64, err error) {
	nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, 0, fmt.Errorf("counting the Nodes: %w", err)
	}
	rl, err := client.CoreV1().ConfigMaps(podnet.RoutesNamespace).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: podnet.RouteLabel})
	if err != nil {
		return 0, 0, fmt.Errorf("counting the pod routes: %w", err)
	}
	return listedCount(len(nl.Items), nl.RemainingItemCount), listedCount(len(rl.Items), rl.RemainingItemCount), nil
}

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
	deadline := time.Now().Add(RouteTimeout)
	said := time.Now()
	for {
		nodes, routes, err := routeCounts(ctx, client)
		switch {
		case err != nil:
			return false, err
		case routes == 0:
			return false, nil
		case routes >= nodes:
			return true, nil
		case time.Now().After(deadline):
			return true, fmt.Errorf("waited %s for every Node's pod route: %d routes for %d Nodes", RouteTimeout, routes, nodes)
		case time.Since(said) >= routeProgressEvery:
			progress(fmt.Sprintf("the pod routes: %d of %d Nodes routed", routes, nodes))
			said = time.Now()
		}
		if err := clock.Sleep(ctx, time.Second); err != nil {
			return true, err
		}
	}
}
