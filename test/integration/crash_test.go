package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/test/clustercheck"
)

// testCrash kills the server with SIGKILL while a client writes
// ConfigMaps and the nodes renew their Leases, starts it again, and checks
// that every acknowledged write survived (the durable etcd fsyncs) and
// that every node is Ready again within one lease duration.
func testCrash(ctx context.Context, t *testing.T, c *cluster) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.adminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	writer := kubernetes.NewForConfigOrDie(cfg)
	var (
		mu    sync.Mutex
		acked []string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("crash-%05d", i), Namespace: testNamespace}, Data: map[string]string{"i": fmt.Sprint(i)}}
			if _, err := writer.CoreV1().ConfigMaps(testNamespace).Create(ctx, cm, metav1.CreateOptions{}); err == nil {
				mu.Lock()
				acked = append(acked, cm.Name)
				mu.Unlock()
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	time.Sleep(5 * time.Second)
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	if before == 0 {
		t.Fatal("no ConfigMap write was acknowledged before the crash")
	}
	must(t, "restart-server", c.harness(t).RestartServer(ctx, 1))
	crashed := time.Now()
	ready := waitAPIServerReady(ctx, t, c)
	t.Logf("kube-apiserver ready %s after the kill", ready.Sub(crashed).Round(time.Second))
	time.Sleep(3 * time.Second)
	close(stop)
	<-done
	mu.Lock()
	t.Logf("%d ConfigMap writes acknowledged (%d before the kill)", len(acked), before)
	want := append([]string(nil), acked...)
	mu.Unlock()
	list, err := c.client.CoreV1().ConfigMaps(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	lost := 0
	for _, name := range want {
		if !have[name] {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged ConfigMap %s is gone after the crash", name)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes lost", lost, len(want))
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
