package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/apimetrics"
)

// fanoutUpdates is how many times requireNodeFanout changes a Node in
// one measurement, fanoutTries how many measurements it takes, and
// fanoutSlack what it allows above the expected count for bookmarks
// (below): less than the one watcher it must catch.
const (
	fanoutUpdates = 50
	fanoutTries   = 3
	fanoutSlack   = 0.5
)

// requireNodeFanout measures how many watchers a Node change reaches, from
// kube-apiserver's own count of the watch events it sends
// (apiserver_watch_events_total{kind="Node"}, summed over every server):
// it changes a label of node fanoutUpdates times and divides the events
// sent by the Node changes its own watch of every Node saw in the same
// window (so that a kubelet's status report meanwhile counts too), its
// own watch left out. That is what one node status report costs the
// cluster in events; it must not grow with the nodes (want at most max).
// The count also holds the watch bookmarks kube-apiserver sends each of
// the Node watches (a dozen or more, by name or not) about once a minute:
// seen in CI as 1 to 9 events in a window of 20 changes (8.05 to 8.45
// watchers where 8 watch), so a window holds 50. Bookmarks only add, so
// the figure is the least of fanoutTries windows of fanoutUpdates
// changes, and it may exceed max by fanoutSlack; a watcher of every Node
// per node adds one per node.
func requireNodeFanout(ctx context.Context, t *testing.T, clients []kubernetes.Interface, node string, nodes int, max float64) {
	t.Helper()
	var fanout float64
	// A window whose watch the server ended (it may, at any time: a
	// watcher that falls behind, a server's restart) is measured again,
	// up to twice as many windows in all.
	for done, attempt := 0, 1; done < fanoutTries; attempt++ {
		if attempt > 2*fanoutTries {
			t.Fatalf("%d of %d windows measured in %d attempts", done, fanoutTries, attempt-1)
		}
		f, err := nodeFanout(ctx, clients, node)
		if errors.Is(err, errWatchEnded) {
			t.Logf("window %d: %v; measuring again", attempt, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("window %d: %.2f watchers", attempt, f)
		if done == 0 || f < fanout {
			fanout = f
		}
		done++
	}
	t.Logf("a Node change reaches %.2f watchers besides this test's, the least of %d windows (%d nodes, %d servers)", fanout, fanoutTries, nodes, len(clients))
	if fanout > max+fanoutSlack {
		t.Errorf("a Node change reaches %.2f watchers with %d nodes and %d servers, want at most %.0f: something watches every Node per node", fanout, nodes, len(clients), max)
	}
}

// errWatchEnded is a window cut short by the end of its watch.
var errWatchEnded = errors.New("the watch of every Node ended")

func nodeFanout(ctx context.Context, clients []kubernetes.Interface, node string) (float64, error) {
	list, err := clients[0].CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	w, err := clients[0].CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	before, endedBefore, err := nodeWatchCounts(ctx, clients)
	if err != nil {
		return 0, err
	}
	watchEnded := func(events int) error {
		_, now, err := nodeWatchCounts(ctx, clients)
		if err != nil {
			return fmt.Errorf("%w after %d events (%v)", errWatchEnded, events, err)
		}
		return fmt.Errorf("%w after %d events; the servers ended %.0f watchers of Nodes as too slow meanwhile", errWatchEnded, events, now-endedBefore)
	}
	// The watch is read while the changes are made. clients[0] must have
	// no request timeout: a watch is one request, ended by the timeout.
	var mu sync.Mutex
	own, mine := 0, 0
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for ev := range w.ResultChan() {
			mu.Lock()
			own++
			if n, ok := ev.Object.(interface{ GetName() string }); ok && ev.Type != watch.Error && n.GetName() == node {
				mine++
			}
			mu.Unlock()
		}
	}()
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return own, mine
	}
	for i := range fanoutUpdates {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"k1m.dev/fanout-test":"%d"}}}`, i)
		if _, err := clients[0].CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return 0, err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, m := counts(); m < fanoutUpdates; _, m = counts() {
		select {
		case <-ended:
			o, _ := counts()
			return 0, watchEnded(o)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("saw %d of the %d changes of node %s in 30 s", m, fanoutUpdates, node)
		}
	}
	// Every watcher has been sent the last change by now; what arrives
	// meanwhile is counted on both sides.
	time.Sleep(2 * time.Second)
	seen, _ := counts()
	select {
	case <-ended:
		return 0, watchEnded(seen)
	default:
	}
	after, _, err := nodeWatchCounts(ctx, clients)
	if err != nil {
		return 0, err
	}
	return (after - before - float64(seen)) / float64(seen), nil
}

// nodeWatchCounts sums over the servers the Node events sent to watchers
// (apiserver_watch_events_total{kind="Node"}) and the watchers of Nodes
// the watch cache ended because they fell behind, their buffer full for
// longer than its dispatch budget (apiserver_terminated_watchers_total
// {resource="nodes"}).
func nodeWatchCounts(ctx context.Context, clients []kubernetes.Interface) (events, ended float64, err error) {
	for i, c := range clients {
		s, err := apimetrics.Scrape(ctx, c)
		if err != nil {
			return 0, 0, fmt.Errorf("server %d: %w", i+1, err)
		}
		events += s.WatchEvents().Events["Node"]
		ended += s.SumsBy("apiserver_terminated_watchers_total", "resource")["nodes"]
	}
	return events, ended, nil
}
