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

func leaderLease(holder string, renewed time.Duration) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kube-controller-manager"}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-renewed)}
	}
	return l
}

func TestControllerManagerLeader(t *testing.T) {
	ctx := context.Background()
	servers := []string{"k1m-server-1", "k1m-server-2", "k1m-server-3"}
	holder := "k1m-server-3_0a1b2c3d-0000-4000-8000-000000000000"
	server, got, err := ControllerManagerLeader(ctx, fake.NewClientset(leaderLease(holder, time.Second)), servers)
	if err != nil || server != 3 || got != holder {
		t.Errorf("ControllerManagerLeader = %d, %q, %v; want server 3, %s", server, got, err, holder)
	}
	for what, client := range map[string]*fake.Clientset{
		"a Lease renewed 20 s ago":     fake.NewClientset(leaderLease(holder, 20*time.Second)),
		"a Lease with no holder":       fake.NewClientset(leaderLease("", 0)),
		"no Lease":                     fake.NewClientset(),
		"a holder of another hostname": fake.NewClientset(leaderLease("vm_0a1b2c3d", time.Second)),
		"a holder named as a prefix":   fake.NewClientset(leaderLease("k1m-server_0a1b2c3d", time.Second)),
	} {
		if server, holder, err := ControllerManagerLeader(ctx, client, servers); err == nil {
			t.Errorf("with %s: ControllerManagerLeader = %d, %q; want an error", what, server, holder)
		}
	}
}
