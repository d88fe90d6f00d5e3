package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/test/clustercheck"
)

// nodeFlap is a node seen not Ready, or seen Ready again after a change
// of its Ready condition since the watch began. Node is empty when the
// Nodes could not be read at the end: nothing can be said then.
// Reason and Message are the Ready condition's: they tell a kubelet that
// reported itself not ready (and why) from a node controller that heard
// nothing from it.
type nodeFlap struct {
	Node    string
	Status  corev1.ConditionStatus
	Since   time.Time
	Reason  string
	Message string
	Err     error
}

func (f nodeFlap) String() string {
	if f.Err != nil {
		return "the Nodes unread: " + f.Err.Error()
	}
	s := fmt.Sprintf("%s (Ready %s since %s", f.Node, f.Status, f.Since.UTC().Format(time.RFC3339))
	if f.Reason != "" || f.Message != "" {
		s += fmt.Sprintf(", %s: %s", f.Reason, f.Message)
	}
	return s + ")"
}

// notReadyWatch records the nodes whose Ready condition is or was not
// True while it runs. A watch ends on its own (a client's request
// timeout, a server that stops), so it follows the Nodes across ends:
// it watches again from the last resourceVersion it saw, lists again
// when that is gone, and stop lists the Nodes a last time. A node that
// went NotReady and back while no watch ran is still caught: its Ready
// condition's lastTransitionTime is after the start.
type notReadyWatch struct {
	client kubernetes.Interface
	since  time.Time
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	flaps map[string]nodeFlap // by node, status and transition time
}

func watchNotReady(ctx context.Context, t *testing.T, client kubernetes.Interface) *notReadyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	// lastTransitionTime has whole seconds: a transition in the second
	// the watch began counts only if a watch sees it.
	w := &notReadyWatch{client: client, since: time.Now().Truncate(time.Second), cancel: cancel,
		done: make(chan struct{}), flaps: map[string]nodeFlap{}}
	go w.follow(ctx)
	return w
}

func (w *notReadyWatch) follow(ctx context.Context) {
	defer close(w.done)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := w.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				clock.Sleep(ctx, time.Second)
				continue
			}
			for i := range list.Items {
				w.observe(&list.Items[i])
			}
			rv = list.ResourceVersion
		}
		rv = w.watchFrom(ctx, rv)
		clock.Sleep(ctx, 200*time.Millisecond)
	}
}

// watchFrom watches the Nodes from rv until the watch ends, and returns
// where to go on from ("" to list again).
func (w *notReadyWatch) watchFrom(ctx context.Context, rv string) string {
	watcher, err := w.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
			return ""
		}
		return rv
	}
	defer watcher.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return rv
		case ev, open = <-watcher.ResultChan():
		}
		if !open {
			return rv
		}
		switch ev.Type {
		case watch.Error:
			if err := apierrors.FromObject(ev.Object); apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				return ""
			}
			return rv
		case watch.Deleted:
		case watch.Added, watch.Modified:
			if node, ok := ev.Object.(*corev1.Node); ok {
				w.observe(node)
			}
		}
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
			rv = m.GetResourceVersion()
		}
	}
}

// noKubeletLabel marks a Node a test registers itself, with no kubelet
// behind it (an attacker's, in NodeProvesAndRoutesOnlyItself): it never
// reports Ready, and the watch leaves it out.
const noKubeletLabel = "integration.k1m.dev/no-kubelet"

func (w *notReadyWatch) observe(node *corev1.Node) {
	if node.Labels[noKubeletLabel] != "" {
		return
	}
	ready := clustercheck.ReadyCondition(node)
	var f nodeFlap
	switch {
	case ready == nil:
		f = nodeFlap{Node: node.Name, Status: corev1.ConditionUnknown, Since: node.CreationTimestamp.Time}
	case ready.Status != corev1.ConditionTrue || ready.LastTransitionTime.Time.After(w.since):
		f = nodeFlap{Node: node.Name, Status: ready.Status, Since: ready.LastTransitionTime.Time, Reason: ready.Reason, Message: ready.Message}
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flaps[f.String()] = f
}

// stop ends the watch, lists the Nodes a last time and returns what it
// saw, in order of time.
func (w *notReadyWatch) stop() []nodeFlap {
	w.cancel()
	<-w.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var listErr error
	for ctx.Err() == nil {
		list, err := w.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if listErr = err; err == nil {
			for i := range list.Items {
				w.observe(&list.Items[i])
			}
			break
		}
		clock.Sleep(ctx, time.Second)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]nodeFlap, 0, len(w.flaps))
	for _, f := range w.flaps {
		out = append(out, f)
	}
	if listErr != nil {
		out = append(out, nodeFlap{Err: listErr})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].String() < out[j].String()
	})
	return out
}
