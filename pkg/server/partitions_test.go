package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/testutil/etcdtest"
)

func serverWithPartitions(names ...string) *Server {
	cfg := &config.CompletedServer{Server: config.DefaultServer()}
	for _, name := range names {
		p, _ := constants.StorePartitionNamed(name)
		cfg.Partitions = append(cfg.Partitions, p)
	}
	return &Server{cfg: cfg}
}

// A new cluster records the flag's partitions, and every later start,
// or a server with other partitions, is checked against them; a cluster
// that ran without partitions keeps none.
func TestSettleLayout(t *testing.T) {
	ctx := context.Background()
	cli, _ := etcdtest.Start(t)
	if err := serverWithPartitions("pods", "nodes").settleLayout(ctx, cli); err != nil {
		t.Fatalf("a new cluster: %v", err)
	}
	if got, ok, err := etcd.ReadLayout(ctx, cli); err != nil || !ok || len(got.Partitions) != 2 || got.Partitions[0] != "pods" || got.Partitions[1] != "nodes" {
		t.Fatalf("recorded %+v, %v, %v; want pods, nodes", got, ok, err)
	}
	if err := serverWithPartitions("pods", "nodes").settleLayout(ctx, cli); err != nil {
		t.Errorf("the same partitions again: %v", err)
	}
	err := serverWithPartitions("pods").settleLayout(ctx, cli)
	want := "--etcd-partitions=pods: the cluster keeps pods, nodes in partitions of their own (recorded in its durable etcd when it was made): give every server --etcd-partitions=pods,nodes, and move resources with k1m etcd-partitions migrate"
	if err == nil || err.Error() != want {
		t.Errorf("other partitions: %v, want %q", err, want)
	}

	ran, _ := etcdtest.Start(t)
	if _, err := ran.Put(ctx, "/registry/configmaps/default/a", "x"); err != nil {
		t.Fatal(err)
	}
	err = serverWithPartitions("pods").settleLayout(ctx, ran)
	want = "--etcd-partitions pods: this cluster was made without partitions and every resource is in its durable etcd: start the server without --etcd-partitions, and move resources with k1m etcd-partitions migrate"
	if err == nil || err.Error() != want {
		t.Errorf("partitions on a cluster that ran without: %v, want %q", err, want)
	}
	if err := serverWithPartitions().settleLayout(ctx, ran); err != nil {
		t.Errorf("no partitions on a cluster that ran without: %v", err)
	}
	if got, ok, err := etcd.ReadLayout(ctx, ran); err != nil || !ok || len(got.Partitions) != 0 {
		t.Errorf("recorded %+v, %v, %v; want no partitions", got, ok, err)
	}
	err = serverWithPartitions("nodes").settleLayout(ctx, ran)
	want = "--etcd-partitions=nodes: the cluster keeps no resource in partitions of their own (recorded in its durable etcd when it was made): start every server without --etcd-partitions, and move resources with k1m etcd-partitions migrate"
	if err == nil || err.Error() != want {
		t.Errorf("partitions on a cluster recorded without: %v, want %q", err, want)
	}
}

// During a migration a server must have the layout it moves to, which
// its kube-apiserver then uses; it learns which partitions it moves.
func TestSettleLayoutDuringAMigration(t *testing.T) {
	ctx := context.Background()
	cli, _ := etcdtest.Start(t)
	if _, err := cli.Put(ctx, "/registry/pods/default/a", "x"); err != nil {
		t.Fatal(err)
	}
	if err := etcd.StartMigration(ctx, cli, etcd.Migration{From: []string{}, To: []string{"pods", "nodes"}}); err != nil {
		t.Fatal(err)
	}
	for _, names := range [][]string{{}, {"pods"}} {
		s := serverWithPartitions(names...)
		err := s.settleLayout(ctx, cli)
		want := "--etcd-partitions=" + strings.Join(names, ",") + ": the cluster is moving pods, nodes into partitions of their own (k1m etcd-partitions migrate): give every server --etcd-partitions=pods,nodes"
		if err == nil || err.Error() != want {
			t.Errorf("--etcd-partitions=%s: %v, want %q", strings.Join(names, ","), err, want)
		}
		if err := s.checkLayout(ctx, cli); err == nil || err.Error() != want {
			t.Errorf("checkLayout, --etcd-partitions=%s: %v, want %q", strings.Join(names, ","), err, want)
		}
	}
	s := serverWithPartitions("pods", "nodes")
	if err := s.settleLayout(ctx, cli); err != nil {
		t.Fatalf("the layout moved to: %v", err)
	}
	if !s.moving("pods") || !s.moving("nodes") || s.moving("endpointslices") {
		t.Errorf("moving pods %v, nodes %v, endpointslices %v; want true, true, false", s.moving("pods"), s.moving("nodes"), s.moving("endpointslices"))
	}
	if got, _, _ := etcd.ReadLayout(ctx, cli); len(got.Partitions) != 0 {
		t.Errorf("recorded layout %v during the migration, want none until it ends", got.Partitions)
	}
}

// A reset or restore is refused while a partition --etcd-partitions does
// not name has data here: it would keep its old members.
func TestResetRefusedWithOtherPartitionData(t *testing.T) {
	s := serverWithPartitions("nodes")
	s.cfg.DataDir = t.TempDir()
	if err := s.requireNoOtherPartitionData(); err != nil {
		t.Fatalf("no partition data: %v", err)
	}
	wal := filepath.Join(s.dir().EtcdPartition("pods"), "member", "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wal, "0000000000000000-0000000000000000.wal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := s.requireNoOtherPartitionData()
	dir := s.dir().EtcdPartition("pods")
	want := "--etcd-partitions: " + dir + " holds the pods partition's data, which a reset without it would leave with its old members: give the server's --etcd-partitions (with pods) (nothing was changed)"
	if err == nil || err.Error() != want {
		t.Errorf("pods data, --etcd-partitions=nodes: %v, want %q", err, want)
	}
	both := serverWithPartitions("pods", "nodes")
	both.cfg.DataDir = s.cfg.DataDir
	if err := both.requireNoOtherPartitionData(); err != nil {
		t.Errorf("pods data, --etcd-partitions=pods,nodes: %v", err)
	}
}

// Each store's member has its own quota flag's value (0: etcd's default).
func TestStoreQuotas(t *testing.T) {
	s := serverWithPartitions("pods")
	s.cfg.DataDir = t.TempDir()
	s.cfg.EtcdQuotaBytes, s.cfg.NoFsyncQuotaBytes, s.cfg.PartitionQuotaBytes = 1<<33, 3<<33, 2<<33
	c := &certs{}
	pods, _ := constants.StorePartitionNamed("pods")
	got := []int64{s.durableMember(c).QuotaBytes, s.noFsyncMember(c).QuotaBytes, s.partitionMember(c, pods).QuotaBytes}
	if want := []int64{1 << 33, 3 << 33, 2 << 33}; !slices.Equal(got, want) {
		t.Errorf("quotas (durable, no-fsync, pods) %v, want %v", got, want)
	}
}
