package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
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

	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
)

// testMoveIntoPartitions moves the Pods and Nodes of the running cluster
// into partitions (k1m etcd-partitions migrate, the server restarted
// meanwhile, and killed once while it seeds the second): writes to them
// are refused while it runs; afterwards their keys are in the partitions
// only, objects kept their resourceVersions, and they are written again.
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
	killWhileSeeding(ctx, t, c, "pods", "nodes")
	startServer(ctx, t, c)
	if left, _ := filepath.Glob(datadir.Server(c.serverData()).EtcdPartition("nodes") + ".seed*"); len(left) != 0 {
		t.Errorf("the seed cut short is left after the start: %v", left)
	}
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

// killWhileSeeding launches the server with its new --etcd-partitions and
// kills it with SIGKILL while it seeds the partition seeding (its staging
// copy is there), once partition seeded is in place: the start after must
// seed the one cut short anew and keep the other.
func killWhileSeeding(ctx context.Context, t *testing.T, c *cluster, seeded, seeding string) {
	t.Helper()
	dir := datadir.Server(c.serverData())
	staging := []string{dir.EtcdPartition(seeding) + ".seed.db", dir.EtcdPartition(seeding) + ".seed"}
	h := c.harness(t)
	must(t, "launch-server", h.LaunchServer(1))
	// The staging copy lasts at least its etcd's start and stop (about a
	// second): a 5 ms poll sees it.
	err := poll.Until(ctx, 5*time.Millisecond, 3*time.Minute, "the server seeding the "+seeding+" partition ("+strings.Join(staging, " or ")+")", func(context.Context) error {
		for _, p := range staging {
			if _, err := os.Stat(p); err == nil {
				return nil
			}
		}
		if etcd.HasData(dir.EtcdPartition(seeding)) {
			return fmt.Errorf("missed: the %s partition is seeded already", seeding)
		}
		return errors.New("not there yet")
	})
	must(t, "the seed's staging copy", err)
	must(t, "kill -9 server", h.KillServer(1))
	if !etcd.HasData(dir.EtcdPartition(seeded)) {
		t.Fatalf("the %s partition had no data when the server was killed while seeding %s", seeded, seeding)
	}
	if etcd.HasData(dir.EtcdPartition(seeding)) {
		t.Fatalf("the %s partition had data when the server was killed while seeding it", seeding)
	}
	t.Logf("server killed while it seeded the %s partition, the %s partition in place", seeding, seeded)
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
