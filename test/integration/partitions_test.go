package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
)

// createPendingPod creates a pod no node takes (its node selector matches
// none): an object of the pods partition that stays as written.
func createPendingPod(ctx context.Context, pods typedcorev1.PodInterface, name string) error {
	_, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"k1m.dev/test-no-such-node": "true"},
			Containers:   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	return err
}

// etcdAt is a client of server 1's etcd member on port (advertised
// address), closed with the test.
func (m *multiCluster) etcdAt(t *testing.T, port int) *clientv3.Client {
	t.Helper()
	s1 := m.h.Server(1)
	cli, err := etcd.NewClient([]string{fmt.Sprintf("https://[%s]:%d", s1.Addr, port)}, server.EtcdClientTLS(s1.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// countKeys is the number of keys under prefix.
func countKeys(ctx context.Context, cli *clientv3.Client, prefix string) (int64, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// requirePartitionsHold wants every Pod, Node and ConfigMap in its
// partition's etcd and none in the durable one, which keeps the rest
// (Namespaces).
func (m *multiCluster) requirePartitionsHold(ctx context.Context, t *testing.T) {
	durable := m.etcdAt(t, 2379)
	for resource, port := range multiPartitions {
		p, ok := constants.StorePartitionNamed(resource)
		if !ok {
			t.Fatalf("no partition %q", resource)
		}
		prefix := p.KeyPrefix
		inPartition, err := countKeys(ctx, m.etcdAt(t, port), prefix)
		if err != nil {
			t.Fatal(err)
		}
		inDurable, err := countKeys(ctx, durable, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if inPartition == 0 || inDurable != 0 {
			t.Errorf("%s: %d keys in its partition (port %d), %d in the durable etcd; want all in the partition", prefix, inPartition, port, inDurable)
		}
	}
	if n, err := countKeys(ctx, durable, "/registry/namespaces/"); err != nil || n == 0 {
		t.Errorf("/registry/namespaces/ in the durable etcd: %d keys (%v), want some", n, err)
	}
}

// testFullPartition fills the pods partition to its quota: new pods are
// refused, while ConfigMaps (their own partition) are written and every node stays
// Ready (its Node in the nodes partition, its Lease in the no-fsync
// etcd). Once what filled it is deleted and compacted, the servers'
// alarm watch defragments and disarms it, and pods are created again.
func (m *multiCluster) testFullPartition(ctx context.Context, t *testing.T) {
	pods := m.etcdAt(t, multiPartitions["pods"])
	// Small values: the file is then about what is in use, and a
	// defragmentation cannot make room (the alarm watch disarms a member
	// whose data takes under 90% of its quota once defragmented).
	const valueSize = 64 << 10
	value := strings.Repeat("x", valueSize)
	filled := 0
	for ; ; filled++ {
		_, err := pods.Put(ctx, fmt.Sprintf("/k1m-test/fill/%04d", filled), value)
		if errors.Is(err, rpctypes.ErrNoSpace) || (err != nil && strings.Contains(err.Error(), rpctypes.ErrNoSpace.Error())) {
			break
		}
		if err != nil {
			t.Fatalf("filling the pods partition: put %d: %v", filled, err)
		}
		if filled*valueSize > 2*multiPartitionQuota {
			t.Fatalf("the pods partition took %d MiB, over twice its quota, without refusing a write", filled*valueSize>>20)
		}
	}
	t.Logf("the pods partition refused writes after %d MiB", filled*valueSize>>20)
	defer func() {
		// Let the cluster go on even if a check below fails.
		pods.Delete(context.Background(), "/k1m-test/fill/", clientv3.WithPrefix())
	}()
	client := m.client(1)
	if err := createPendingPod(ctx, client.CoreV1().Pods("default"), "into-a-full-partition"); err == nil || !strings.Contains(err.Error(), "database space exceeded") {
		t.Errorf("a pod created while the pods partition is full: %v, want etcd's database space exceeded", err)
	}
	for i := 1; i <= multiServers; i++ {
		name := fmt.Sprintf("beside-a-full-partition-%d", i)
		if _, err := m.client(i).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("a ConfigMap through server %d while the pods partition is full: %v", i, err)
		}
	}
	// Through two renew intervals: no node NotReady, sampled every 5 s.
	for until := time.Now().Add(20 * time.Second); time.Now().Before(until); {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			err = allReady(list.Items, multiNodes)
		}
		if err != nil {
			t.Errorf("while the pods partition is full: %v", err)
			break
		}
		if err := clock.Sleep(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := pods.Delete(ctx, "/k1m-test/fill/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// Physical: returned once the member has freed the history, not when
	// the compaction is only scheduled.
	if _, err := pods.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	// Every member's alarm watch (every 30 s) defragments and disarms its
	// own member.
	testutil.Eventually(t, 2*time.Minute, "a pod created and deleted once the pods partition is emptied and compacted", func() error {
		podsAPI := client.CoreV1().Pods("default")
		if err := createPendingPod(ctx, podsAPI, "after-a-full-partition"); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return podsAPI.Delete(ctx, "after-a-full-partition", metav1.DeleteOptions{})
	})
}

// allReady wants want nodes, every one Ready.
func allReady(nodes []corev1.Node, want int) error {
	var notReady []string
	for _, n := range nodes {
		if !clustercheck.Ready(&n) {
			notReady = append(notReady, n.Name)
		}
	}
	if len(nodes) != want || len(notReady) > 0 {
		return fmt.Errorf("%d nodes, not Ready: %v; want %d Ready", len(nodes), notReady, want)
	}
	return nil
}
