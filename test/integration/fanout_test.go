package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/pkg/testutil"
)

// requireEveryNodeWatches wants the servers to hold, together, exactly
// want watches of every Node (apiserver_longrunning_requests
// {resource="nodes",scope="cluster",verb="WATCH"}; a kubelet's,
// kube-proxy's or k1m agent's watch of its own Node is scope "resource").
// Each such watch is sent every Node status report, so the count is what
// one report costs the cluster besides its own node: it must not grow
// with the nodes (a watcher of every Node per node adds one per node).
// The count is deterministic once the components have started; what a
// change costs in events sent per second is k1m-bench clusterload's
// measurement (WatchEventsByKind), not a test's.
func requireEveryNodeWatches(ctx context.Context, t *testing.T, clients []kubernetes.Interface, nodes, want int) {
	t.Helper()
	// metrics-server's watch is one of them: counted once it is ready
	// (its caches synced), which takes a minute from a cluster's start.
	testutil.Eventually(t, 3*time.Minute, "metrics-server available", func() error {
		d, err := clients[0].AppsV1().Deployments("kube-system").Get(ctx, "metrics-server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, d.Status.Replicas)
		}
		return nil
	})
	var last []int
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%d watches of every Node over %d servers (%d nodes)", want, len(clients), nodes), func() error {
		counts, total, err := everyNodeWatches(ctx, clients)
		if err != nil {
			return err
		}
		last = counts
		if total != want {
			return fmt.Errorf("%d (per server: %s)", total, joinCounts(counts))
		}
		return nil
	})
	t.Logf("watches of every Node: %s per server, %d nodes", joinCounts(last), nodes)
}

// everyNodeWatches reads each server's count of watches of every Node.
func everyNodeWatches(ctx context.Context, clients []kubernetes.Interface) ([]int, int, error) {
	counts := make([]int, len(clients))
	total := 0
	for i, c := range clients {
		s, err := apimetrics.Scrape(ctx, c)
		if err != nil {
			return nil, 0, fmt.Errorf("server %d: %w", i+1, err)
		}
		counts[i] = int(s.SumWhere("apiserver_longrunning_requests", map[string]string{"resource": "nodes", "scope": "cluster", "verb": "WATCH"}))
		total += counts[i]
	}
	return counts, total, nil
}

func joinCounts(counts []int) string {
	s := make([]string, len(counts))
	for i, n := range counts {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, " + ")
}
