package clustercheck

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestFreshLeaseHolder(t *testing.T) {
	lease := func(name, holder string, renewed time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-renewed)}
		}
		return l
	}
	client := fake.NewClientset(lease("fresh", "vm_a", time.Second), lease("stale", "vm_b", 20*time.Second), lease("free", "", 0))
	ctx := context.Background()
	if got, err := FreshLeaseHolder(ctx, client, "fresh", 6*time.Second); err != nil || got != "vm_a" {
		t.Errorf("FreshLeaseHolder(fresh) = %q, %v; want vm_a", got, err)
	}
	for _, name := range []string{"stale", "free", "missing"} {
		if got, err := FreshLeaseHolder(ctx, client, name, 6*time.Second); err == nil {
			t.Errorf("FreshLeaseHolder(%s) = %q, want an error", name, got)
		}
	}
	if got, want := LeaderElectedMessage("vm_a"), `message="vm_a became leader"`; got != want {
		t.Errorf("LeaderElectedMessage = %s, want %s", got, want)
	}
}
