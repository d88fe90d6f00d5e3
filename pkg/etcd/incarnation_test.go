package etcd

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The first incarnation recorded stays; a restore's replaces it; a
// member's own copy is read even without its peers.
func TestIncarnationRecordedOnce(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, clientTLS := startMember(ctx, t, dir, freePortPair(t), 0)
	defer r.Stop()
	cli := client(t, r.Member, clientTLS)
	if _, err := ReadIncarnation(ctx, r.Member.ClientURL(), clientTLS, 5*time.Second); !errors.Is(err, ErrNoIncarnation) {
		t.Errorf("before any: %v, want ErrNoIncarnation", err)
	}
	at := time.Unix(1_700_000_000, 0).UTC()
	first := Incarnation{ID: "aaaa", How: "created", At: at}
	second := Incarnation{ID: "bbbb", How: "created", At: at}
	for _, try := range []Incarnation{first, second} {
		got, err := EnsureIncarnation(ctx, cli, try)
		if err != nil || got != first {
			t.Errorf("EnsureIncarnation(%v) = %v, %v; want the first, %v", try, got, err, first)
		}
	}
	restored := Incarnation{ID: "cccc", Replaces: "aaaa", How: "restored from /s", At: at}
	if err := SetIncarnation(ctx, cli, restored); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadIncarnation(ctx, r.Member.ClientURL(), clientTLS, 5*time.Second); err != nil || got != restored {
		t.Errorf("ReadIncarnation = %v, %v; want %v", got, err, restored)
	}
}

func TestFenceAgainst(t *testing.T) {
	created := Incarnation{ID: "aaaa"}
	restored := Incarnation{ID: "bbbb", Replaces: "aaaa"}
	other := Incarnation{ID: "cccc"}
	for _, c := range []struct {
		mine, theirs Incarnation
		want         Fence
	}{
		{created, created, Same},
		{restored, restored, Same},
		{restored, created, PeerReplaced}, // the restored server, an old one still running
		{created, restored, Stale},        // an old server, the restored one running
		{created, other, Stale},
		{restored, other, Stale},
		{other, Incarnation{ID: "dddd", Replaces: "bbbb"}, Stale}, // restored twice since
	} {
		if got := c.mine.FenceAgainst(c.theirs); got != c.want {
			t.Errorf("%+v against %+v: %v, want %v", c.mine, c.theirs, got, c.want)
		}
	}
}

// A snapshot restored with an incarnation's own token starts a raft
// cluster of a new ID: a member of the old cluster that kept running (its
// data past the snapshot) cannot pull the restored member back into the
// old group. With etcd's default token the restored member would get the
// old cluster's and member's IDs, which is what this test fails on.
func TestRestoreStartsANewRaftCluster(t *testing.T) {
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, ra := startFirst(ctx, t, dir, "server-a", serverTLS)
	b := clusterMember(t, dir, "server-b", serverTLS)
	rb := joinAndPromote(ctx, t, []string{a.ClientURL()}, clientTLS, b)
	oldCluster, oldMember := ra.etcd.Server.Cluster().ID(), ra.etcd.Server.ID()
	cli := client(t, a, clientTLS)
	if _, err := cli.Put(ctx, "/before", "v"); err != nil {
		t.Fatal(err)
	}
	store := Snapshots{Dir: filepath.Join(dir, "snapshots")}
	info, err := store.Save(ctx, SnapshotSources{Durable: a.ClientURL()}, clientTLS, "snap", "server-a", "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/after", "v"); err != nil {
		t.Fatal(err)
	}
	ra.Stop()

	restored := a
	restored.ClusterToken = Incarnation{ID: "0123456789abcdef"}.ClusterToken()
	if _, err := Restore(filepath.Join(store.Dir, info.Name), restored, nil); err != nil {
		t.Fatal(err)
	}
	ra2, err := Start(ctx, restored)
	if err != nil {
		t.Fatal(err)
	}
	defer ra2.Stop()
	if ra2.etcd.Server.Cluster().ID() == oldCluster || ra2.etcd.Server.ID() == oldMember {
		t.Fatalf("restored member: cluster %x, member %x: the old cluster's IDs (old members would be taken for its peers)", ra2.etcd.Server.Cluster().ID(), ra2.etcd.Server.ID())
	}
	if rb.etcd.Server.Cluster().ID() != oldCluster {
		t.Fatalf("server-b's cluster ID changed: %x, want %x", rb.etcd.Server.Cluster().ID(), oldCluster)
	}
	// server-b keeps sending its raft messages to server-a's peer URL;
	// the restored member stays alone, with the snapshot's data.
	time.Sleep(3 * time.Second)
	cli2 := client(t, restored, clientTLS)
	if got := view(ctx, t, cli2); !reflect.DeepEqual(got, []memberView{{"server-a", false}}) {
		t.Errorf("restored members %+v, want server-a alone", got)
	}
	resp, err := cli2.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if !reflect.DeepEqual(keys, []string{"/before"}) {
		t.Errorf("restored keys %v, want [/before]", keys)
	}
}
