package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
)

// testMoveIntoPartitions moves the Pods and Nodes of the running cluster
// into partitions (k1m etcd-partitions migrate, the server restarted
// meanwhile): writes to them are refused while it runs; afterwards their
// keys are in the partitions only, objects kept their resourceVersions,
// and they are written again.
func testMoveIntoPartitions(ctx context.Context, t *testing.T, c *cluster) {
	pods := c.client.CoreV1().Pods("kube-system")
	before, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil || len(before.Items) == 0 {
		t.Fatalf("kube-system pods before: %v (%d)", err, len(before.Items))
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, agents[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	out := &testutil.Buffer{}
	// --settle: no webhook here holds a write for long; 5 s is ample for
	// one in flight when the refusal lands.
	migrate := exec.Command(c.k1m, "etcd-partitions", "migrate", "--etcd-partitions=nodes,pods", "--data-dir", c.serverData(), "--timeout=5m", "--settle=5s")
	migrate.Stdout, migrate.Stderr = out, out
	if err := migrate.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- migrate.Wait() }()
	defer func() {
		if migrate.ProcessState == nil {
			migrate.Process.Kill()
		}
	}()

	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "during-migration", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: busybox}}}}
	refused := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), server.FreezeName)
	}
	testutil.Eventually(t, time.Minute, "Pod writes refused by "+server.FreezeName, func() error {
		_, err := c.client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !refused(err) {
			return fmt.Errorf("dry-run create Pod: %v; the command printed:\n%s", err, out.String())
		}
		return nil
	})
	if _, err := c.client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{}); !refused(err) {
		t.Errorf("create Pod during the migration: %v, want refused by %s", err, server.FreezeName)
	}
	if err := c.client.CoreV1().Nodes().Delete(ctx, agents[1], metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); !refused(err) {
		t.Errorf("dry-run delete Node %s during the migration: %v, want refused by %s", agents[1], err, server.FreezeName)
	}
	testutil.Eventually(t, time.Minute, "the migration recorded", func() error {
		resp, err := etcdClient(t, c.tlsDir(), 2379).Get(ctx, "/k1m/partitions/migration")
		if err != nil || len(resp.Kvs) == 0 {
			return fmt.Errorf("/k1m/partitions/migration: %v; the command printed:\n%s", err, out.String())
		}
		return nil
	})

	stopServerCleanly(t, c)
	c.partitions = "pods,nodes"
	startServer(ctx, t, c)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("k1m etcd-partitions migrate: %v\n%s", err, out.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("k1m etcd-partitions migrate still running after the server's restart:\n%s", out.String())
	}
	t.Logf("k1m etcd-partitions migrate:\n%s", out.String())
	// A lone server publishes no address: the refusal is confirmed
	// through its own API all the same.
	if !slices.Contains(strings.Split(out.String(), "\n"), "this server refuses writes to pods, nodes") {
		t.Errorf("the command did not confirm the refusal through the server's API")
	}

	for prefix, port := range map[string]int{"/registry/pods/": 2383, "/registry/minions/": 2385} {
		if n := countAt(ctx, t, c, 2379, prefix); n != 0 {
			t.Errorf("%d %s keys left in the durable etcd, want none", n, prefix)
		}
		if n := countAt(ctx, t, c, port, prefix); n == 0 {
			t.Errorf("no %s keys in its partition (port %d)", prefix, port)
		}
	}
	after, err := c.client.CoreV1().Nodes().Get(ctx, agents[0], metav1.GetOptions{})
	if err != nil || after.UID != node.UID {
		t.Errorf("node %s after: %v (uid %s, was %s)", agents[0], err, after.UID, node.UID)
	}
	for _, p := range before.Items {
		got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // replaced meanwhile
		case err != nil:
			t.Errorf("pod %s after: %v", p.Name, err)
		case got.UID != p.UID:
			t.Errorf("pod %s: uid %s, was %s", p.Name, got.UID, p.UID)
		}
	}
	if _, err := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, server.FreezeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ValidatingAdmissionPolicy %s after the migration: %v, want gone", server.FreezeName, err)
	}
	testutil.Eventually(t, time.Minute, "a Pod written after the migration", func() error {
		_, err := c.client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{})
		return err
	})
	if err := c.client.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}

func (c *cluster) tlsDir() string { return filepath.Join(c.serverData(), "tls") }

// countAt counts the keys under prefix in the etcd at [::1]:port.
func countAt(ctx context.Context, t *testing.T, c *cluster, port int, prefix string) int64 {
	t.Helper()
	resp, err := etcdClient(t, c.tlsDir(), port).Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("counting %s at port %d: %v", prefix, port, err)
	}
	return resp.Count
}
