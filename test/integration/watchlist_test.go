package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/pkg/testutil"
)

// streamedLists are the lists a server has streamed (WatchList, KEP-3157:
// apiserver_watch_list_duration_seconds counts each once its initial
// events are sent), per resource, cluster-wide ones only.
func streamedLists(ctx context.Context, client kubernetes.Interface) (map[string]float64, error) {
	s, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return nil, err
	}
	return s.HistogramCountsWhere("apiserver_watch_list_duration_seconds", "resource", map[string]string{"scope": "cluster"}), nil
}

// requireNodeStreamsItsLists wants a restarted node's lists streamed, not
// LISTs (constants.NodeFeatureGates): since before, at least two more
// streamed lists of Services (its kubelet's and kube-proxy's) and one of
// EndpointSlices (kube-proxy's). The controller-manager's informers
// stream too, but list again only when they start or lose their version.
func requireNodeStreamsItsLists(ctx context.Context, t *testing.T, client kubernetes.Interface, before map[string]float64) {
	t.Helper()
	want := map[string]float64{"services": 2, "endpointslices": 1}
	testutil.Eventually(t, time.Minute, fmt.Sprintf("the restarted node's streamed lists (more than before, at least %v)", want), func() error {
		now, err := streamedLists(ctx, client)
		if err != nil {
			return err
		}
		for resource, n := range want {
			if got := now[resource] - before[resource]; got < n {
				return fmt.Errorf("%s: %v more streamed lists (%v before, %v now)", resource, got, before[resource], now[resource])
			}
		}
		return nil
	})
}
