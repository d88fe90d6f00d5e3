package server

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestEnsureLabel(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "s1", Labels: map[string]string{"kubernetes.io/hostname": "s1"}}})
	if err := ensureLabel(ctx, client, "missing", ControlPlaneLabel, "true"); err == nil {
		t.Error("a Node not registered yet: no error")
	}
	for range 2 { // the second finds it labelled and writes nothing
		if err := ensureLabel(ctx, client, "s1", ControlPlaneLabel, "true"); err != nil {
			t.Fatal(err)
		}
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "s1", metav1.GetOptions{})
	if want := map[string]string{"kubernetes.io/hostname": "s1", ControlPlaneLabel: "true"}; !reflect.DeepEqual(node.Labels, want) {
		t.Errorf("labels %v, want %v", node.Labels, want)
	}
	var patches int
	for _, a := range client.Actions() {
		if _, ok := a.(k8stesting.PatchAction); ok {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("%d PATCHes, want 1 (none once labelled)", patches)
	}
}
