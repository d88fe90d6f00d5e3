package integration

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/dnsscale"
	"k1m.dev/k1m/pkg/testutil"
)

// testCoreDNSFollowsNodes checks pkg/dnsscale on a cluster whose servers
// run with --dns-nodes-per-replica=1: the first server applied CoreDNS at
// the two replicas of an empty cluster, and the elected scaler brings it
// to one replica per node (more than two), every one of them ready.
func testCoreDNSFollowsNodes(ctx context.Context, t *testing.T, client kubernetes.Interface, nodes int) {
	want := dnsscale.Replicas(nodes, 1)
	if want <= dnsscale.MinReplicas {
		t.Fatalf("%d nodes: the check needs more nodes than the %d replicas CoreDNS starts at", nodes, dnsscale.MinReplicas)
	}
	testutil.Eventually(t, 3*dnsscale.Interval, fmt.Sprintf("CoreDNS at %d ready replicas", want), func() error {
		d, err := client.AppsV1().Deployments(dnsscale.Namespace).Get(ctx, dnsscale.Deployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := *d.Spec.Replicas; got != want || d.Status.ReadyReplicas != want {
			return fmt.Errorf("%d replicas, %d ready", got, d.Status.ReadyReplicas)
		}
		return nil
	})
	lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, dnsscale.Election, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the scaler's Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("the scaler's Lease %s has no holder", dnsscale.Election)
	}
}
