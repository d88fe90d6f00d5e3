package clustercheck

import (
	"context"
	"errors"
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
	// Servers 2 and 3 took the Lease at some time; only server 3's log
	// names the holder now.
	logs := map[string][]int{`message="vm_a became leader"`: {3}, `message="vm_b became leader"`: {1, 2}}
	serversLogging := func(text string) ([]int, error) { return logs[text], nil }
	server, holder, err := ControllerManagerLeader(ctx, fake.NewClientset(leaderLease("vm_a", time.Second)), serversLogging)
	if err != nil || server != 3 || holder != "vm_a" {
		t.Errorf("ControllerManagerLeader = %d, %q, %v; want server 3, vm_a", server, holder, err)
	}
	for what, client := range map[string]*fake.Clientset{
		"a Lease renewed 20 s ago": fake.NewClientset(leaderLease("vm_a", 20*time.Second)),
		"a Lease with no holder":   fake.NewClientset(leaderLease("", 0)),
		"no Lease":                 fake.NewClientset(),
		"a holder two logs name":   fake.NewClientset(leaderLease("vm_b", time.Second)),
		"a holder no log names":    fake.NewClientset(leaderLease("vm_c", time.Second)),
	} {
		if server, holder, err := ControllerManagerLeader(ctx, client, serversLogging); err == nil {
			t.Errorf("with %s: ControllerManagerLeader = %d, %q; want an error", what, server, holder)
		}
	}
	unreadable := func(string) ([]int, error) { return nil, errors.New("no log") }
	if _, _, err := ControllerManagerLeader(ctx, fake.NewClientset(leaderLease("vm_a", time.Second)), unreadable); err == nil {
		t.Error("ControllerManagerLeader with unreadable logs: no error")
	}
}
