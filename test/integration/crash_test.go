package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/faults"
)

// testCrash kills the server with SIGKILL while a client writes
// ConfigMaps and the nodes renew their Leases, starts it again, and checks
// that every acknowledged write survived (the durable etcd fsyncs) and
// that every node is Ready again within one lease duration.
func testCrash(ctx context.Context, t *testing.T, c *cluster) {
	cfg, err := testutil.RESTConfig(c.adminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	w := faults.StartWriter(ctx, kubernetes.NewForConfigOrDie(cfg), testNamespace, "crash", 0)
	time.Sleep(5 * time.Second)
	before := w.Acknowledged()
	if before == 0 {
		t.Fatal("no ConfigMap write was acknowledged before the crash")
	}
	must(t, "restart-server", c.harness(t).RestartServer(ctx, 1))
	crashed := time.Now()
	ready := waitAPIServerReady(ctx, t, c)
	t.Logf("kube-apiserver ready %s after the kill", ready.Sub(crashed).Round(time.Second))
	time.Sleep(3 * time.Second)
	want := w.Stop()
	t.Logf("%d ConfigMap writes acknowledged (%d before the kill)", len(want), before)
	lost, err := faults.Missing(ctx, c.client, testNamespace, want)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range lost {
		if i < 5 {
			t.Errorf("acknowledged ConfigMap %s is gone after the crash", name)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes lost", len(lost), len(want))
	}
	// Every node Ready, with a Lease renewed after the restart, within one
	// lease duration of kube-apiserver being ready.
	deadline := ready.Add(leaseDuration)
	for {
		err := nodesRenewedAndReady(ctx, c.client, ready)
		if err == nil {
			t.Logf("all nodes Ready with fresh Leases %s after kube-apiserver was ready", time.Since(ready).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every node Ready within one lease duration (%s) of the restart: %v", leaseDuration, err)
		}
		time.Sleep(time.Second)
	}
}

func nodesRenewedAndReady(ctx context.Context, client kubernetes.Interface, since time.Time) error {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range list.Items {
		if !clustercheck.Ready(&n) {
			return fmt.Errorf("node %s not Ready", n.Name)
		}
		lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since.Add(-time.Second)) {
			return fmt.Errorf("lease %s not renewed since the restart", n.Name)
		}
	}
	return nil
}
