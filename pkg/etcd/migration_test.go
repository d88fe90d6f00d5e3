package etcd

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A seeded partition holds the durable etcd's keys under its prefix, each
// at its revision (the objects' resourceVersions), and nothing else; its
// store's revision is raised above the durable's and older revisions are
// compacted, so a watcher resuming from the durable's is told to list.
func TestSeedPartition(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	durable, clientTLS := startMember(ctx, t, dir, freePortPair(t), 0)
	defer durable.Stop()
	cli := client(t, durable.Member, clientTLS)
	revs := map[string]int64{}
	for _, k := range []string{"/registry/configmaps/default/c", "/registry/pods/default/a", "/registry/pods/kube-system/b", "/registry/podtemplates/default/t", "/k1m/partitions/layout"} {
		resp, err := cli.Put(ctx, k, "value of "+k)
		if err != nil {
			t.Fatal(err)
		}
		revs[k] = resp.Header.Revision
	}
	serverTLS, _ := certs(t, dir)
	m := Member{Name: "pods", Partition: "pods", DataDir: filepath.Join(dir, "etcd-partitions", "pods"), Host: "::1", Port: freePortPair(t), TLS: serverTLS, ClusterToken: "k1m-pods-test"}
	const bump = 1_000_000
	var steps []string
	if err := SeedPartition(ctx, durable.Member.ClientURL(), clientTLS, m, "/registry/pods/", bump, func(s string) { steps = append(steps, s) }); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 {
		t.Errorf("progress %q, want two steps", steps)
	}
	if matches, _ := filepath.Glob(m.DataDir + ".seed*"); len(matches) != 0 {
		t.Errorf("left behind: %v", matches)
	}
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	pcli := client(t, m, clientTLS)
	got, err := pcli.Get(ctx, "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]int64{}
	for _, kv := range got.Kvs {
		kept[string(kv.Key)] = kv.ModRevision
		if string(kv.Value) != "value of "+string(kv.Key) {
			t.Errorf("%s = %q", kv.Key, kv.Value)
		}
	}
	want := map[string]int64{"/registry/pods/default/a": revs["/registry/pods/default/a"], "/registry/pods/kube-system/b": revs["/registry/pods/kube-system/b"]}
	if !reflect.DeepEqual(kept, want) {
		t.Errorf("partition keys (key: mod revision) %v, want %v", kept, want)
	}
	if got.Header.Revision <= bump {
		t.Errorf("partition revision %d, want above %d", got.Header.Revision, bump)
	}
	w := pcli.Watch(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithRev(revs["/registry/pods/kube-system/b"]))
	resp := <-w
	if !errors.Is(resp.Err(), rpctypes.ErrCompacted) {
		t.Errorf("a watch from the durable's revision: %v, want compacted", resp.Err())
	}
}

// A migration is recorded only from the recorded layout and once; its
// end records the new layout and deletes the moved keys in one step.
func TestMigrationRecords(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	durable, clientTLS := startMember(ctx, t, dir, freePortPair(t), 0)
	defer durable.Stop()
	cli := client(t, durable.Member, clientTLS)
	for _, k := range []string{"/registry/pods/default/a", "/registry/configmaps/default/c"} {
		if _, err := cli.Put(ctx, k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := StartMigration(ctx, cli, Migration{From: []string{"nodes"}, To: []string{"pods", "nodes"}}); !errors.Is(err, ErrMigrationMoved) {
		t.Errorf("from a layout not recorded: %v, want %v", err, ErrMigrationMoved)
	}
	mig := Migration{From: []string{}, To: []string{"pods"}}
	if err := StartMigration(ctx, cli, mig); err != nil {
		t.Fatal(err)
	}
	if err := StartMigration(ctx, cli, mig); !errors.Is(err, ErrMigrationMoved) {
		t.Errorf("a second migration: %v, want %v", err, ErrMigrationMoved)
	}
	if got, ok, err := ReadMigration(ctx, cli); err != nil || !ok || !reflect.DeepEqual(got, mig) {
		t.Errorf("ReadMigration = %+v, %v, %v; want %+v", got, ok, err, mig)
	}
	if got := mig.Moved(); !reflect.DeepEqual(got, []string{"pods"}) {
		t.Errorf("Moved() = %v", got)
	}
	for _, server := range []string{"server-1", "server-2"} {
		if holder, err := ClaimSeed(ctx, cli, "pods", server); err != nil || holder != "server-1" {
			t.Errorf("ClaimSeed by %s = %q, %v; want server-1", server, holder, err)
		}
	}
	if err := FinishMigration(ctx, cli, mig, []string{"/registry/pods/"}); err != nil {
		t.Fatal(err)
	}
	if layout, ok, err := ReadLayout(ctx, cli); err != nil || !ok || !reflect.DeepEqual(layout.Partitions, []string{"pods"}) {
		t.Errorf("layout after = %+v, %v, %v; want pods", layout, ok, err)
	}
	left, _ := keysUnder(ctx, t, cli, "/registry/")
	if !reflect.DeepEqual(left, []string{"/registry/configmaps/default/c=x"}) {
		t.Errorf("durable keys after %v, want the ConfigMap only", left)
	}
	if rest, _ := keysUnder(ctx, t, cli, partitionSeedPrefix); len(rest) != 0 {
		t.Errorf("seed claims left: %v", rest)
	}
	if _, ok, _ := ReadMigration(ctx, cli); ok {
		t.Error("migration still recorded")
	}
	if err := FinishMigration(ctx, cli, mig, nil); !errors.Is(err, ErrMigrationMoved) {
		t.Errorf("finishing twice: %v, want %v", err, ErrMigrationMoved)
	}
}

// A server records its layout only if neither the layout nor a migration
// changed since it checked them.
func TestRecordServerLayoutIfUnchanged(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	durable, clientTLS := startMember(ctx, t, dir, freePortPair(t), 0)
	defer durable.Stop()
	cli := client(t, durable.Member, clientTLS)
	if _, err := RecordLayout(ctx, cli, Layout{Partitions: []string{}}); err != nil {
		t.Fatal(err)
	}
	seen, err := ReadLayoutRevisions(ctx, cli)
	if err != nil || seen.Layout == 0 || seen.Migration != 0 {
		t.Fatalf("ReadLayoutRevisions = %+v, %v; want the layout's revision and no migration", seen, err)
	}
	l := ServerLayout{Partitions: []string{}, Address: "https://[fd00::1]:6443"}
	if err := RecordServerLayout(ctx, cli, "s1", l, seen); err != nil {
		t.Fatal(err)
	}
	if err := StartMigration(ctx, cli, Migration{From: []string{}, To: []string{"pods"}}); err != nil {
		t.Fatal(err)
	}
	if err := RecordServerLayout(ctx, cli, "s2", l, seen); !errors.Is(err, ErrMigrationMoved) {
		t.Errorf("recording after a migration began: %v, want %v", err, ErrMigrationMoved)
	}
	got, err := ServerLayouts(ctx, cli)
	if want := map[string]ServerLayout{"s1": l}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ServerLayouts = %+v, %v; want %+v", got, err, want)
	}
}
