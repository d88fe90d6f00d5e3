package server

import (
	"context"
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
	want := `--etcd-partitions "pods": the cluster keeps pods, nodes in partitions of their own (recorded in its durable etcd when it was made): give every server --etcd-partitions="pods,nodes"`
	if err == nil || err.Error() != want {
		t.Errorf("other partitions: %v, want %q", err, want)
	}

	ran, _ := etcdtest.Start(t)
	if _, err := ran.Put(ctx, "/registry/configmaps/default/a", "x"); err != nil {
		t.Fatal(err)
	}
	err = serverWithPartitions("pods").settleLayout(ctx, ran)
	want = "--etcd-partitions pods: this cluster was made without partitions and every resource is in its durable etcd: partitions are set when a cluster is made (start the server without --etcd-partitions)"
	if err == nil || err.Error() != want {
		t.Errorf("partitions on a cluster that ran without: %v, want %q", err, want)
	}
	if err := serverWithPartitions().settleLayout(ctx, ran); err != nil {
		t.Errorf("no partitions on a cluster that ran without: %v", err)
	}
	if got, ok, err := etcd.ReadLayout(ctx, ran); err != nil || !ok || len(got.Partitions) != 0 {
		t.Errorf("recorded %+v, %v, %v; want no partitions", got, ok, err)
	}
}
