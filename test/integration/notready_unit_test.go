package integration

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/testutil"
)

func nodeWithReady(name string, status corev1.ConditionStatus, since time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(since)},
		}},
	}
}

// The watch records a node that goes Unknown and comes back, and the
// last list catches a node whose Ready changed where no watch saw it.
func TestNotReadyWatchRecordsFlaps(t *testing.T) {
	ctx := context.Background()
	before := time.Now().Add(-time.Hour).Truncate(time.Second)
	// A test's own Node with no kubelet behind it never reports Ready,
	// and is left out.
	attacker := nodeWithReady("k1m-evil", corev1.ConditionUnknown, time.Now().Add(time.Minute).Truncate(time.Second))
	attacker.Labels = map[string]string{noKubeletLabel: "true"}
	client := fake.NewSimpleClientset(nodeWithReady("steady", corev1.ConditionTrue, before), nodeWithReady("flapping", corev1.ConditionTrue, before), attacker)
	w := watchNotReady(ctx, t, client)
	testutil.Eventually(t, 10*time.Second, "the watch", func() error {
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" {
				return nil
			}
		}
		return errors.New("no watch yet")
	})
	down, up := w.since.Add(2*time.Second), w.since.Add(3*time.Second)
	unknown := nodeWithReady("flapping", corev1.ConditionUnknown, down)
	unknown.Status.Conditions[0].Reason, unknown.Status.Conditions[0].Message = "NodeStatusUnknown", "Kubelet stopped posting node status."
	for _, n := range []*corev1.Node{unknown, nodeWithReady("flapping", corev1.ConditionTrue, up)} {
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "both changes seen", func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.flaps) != 2 {
			return fmt.Errorf("%d changes seen", len(w.flaps))
		}
		return nil
	})
	// A change no watch sees (what a server's restart amounts to): the
	// watch is ended first, and stop's last list reads it.
	w.cancel()
	<-w.done
	unseen := w.since.Add(5 * time.Second)
	if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), nodeWithReady("steady", corev1.ConditionTrue, unseen), ""); err != nil {
		t.Fatal(err)
	}
	want := []nodeFlap{
		{Node: "flapping", Status: corev1.ConditionUnknown, Since: down, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."},
		{Node: "flapping", Status: corev1.ConditionTrue, Since: up},
		{Node: "steady", Status: corev1.ConditionTrue, Since: unseen},
	}
	if got := w.stop(); !reflect.DeepEqual(times(got), times(want)) {
		t.Errorf("flaps %v, want %v", got, want)
	}
}

// times puts each flap's time in UTC and whole seconds, as the API has it.
func times(flaps []nodeFlap) []nodeFlap {
	out := make([]nodeFlap, len(flaps))
	for i, f := range flaps {
		f.Since = f.Since.UTC().Truncate(time.Second)
		out[i] = f
	}
	return out
}
