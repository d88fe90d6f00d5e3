package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// startMember starts a durable member in dir and returns it with a client
// TLS for it.
func startMember(ctx context.Context, t *testing.T, dir string, port int, quota int64) (*Running, TLS) {
	t.Helper()
	serverTLS, clientTLS := certs(t, dir)
	r, err := Start(ctx, Member{Name: "durable", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: port, TLS: serverTLS, QuotaBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	return r, clientTLS
}

// startPartition starts a member of the pods partition in dir, with the
// certificates startMember made there.
func startPartition(ctx context.Context, t *testing.T, dir string, port int) *Running {
	t.Helper()
	serverTLS, _ := certs(t, dir)
	r, err := Start(ctx, Member{Name: "pods", Partition: "pods", DataDir: filepath.Join(dir, "etcd-partitions", "pods"), Host: "::1", Port: port, TLS: serverTLS})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// withPods is a durable member and a pods partition's, started in dir,
// with the snapshot directory and sources that cover both.
type withPods struct {
	durable, pods *Running
	clientTLS     TLS
	store         Snapshots
	src           SnapshotSources
}

func startWithPods(ctx context.Context, t *testing.T, dir string) withPods {
	t.Helper()
	r, clientTLS := startMember(ctx, t, dir, freePortPair(t), 0)
	pods := startPartition(ctx, t, dir, freePortPair(t))
	return withPods{durable: r, pods: pods, clientTLS: clientTLS, store: Snapshots{Dir: filepath.Join(dir, "snapshots")},
		src: SnapshotSources{Durable: r.Member.ClientURL(), Partitions: []PartitionSource{{Name: "pods", Endpoint: pods.Member.ClientURL()}}}}
}

// keysUnder are the keys and values under prefix, as key=value.
func keysUnder(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) ([]string, int64) {
	t.Helper()
	got, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range got.Kvs {
		keys = append(keys, string(kv.Key)+"="+string(kv.Value))
	}
	return keys, got.Header.Revision
}

// A snapshot covers the durable member and every partition's, and a
// restore brings back all of them, each with its revision raised.
func TestSnapshotSaveRestore(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWithPods(ctx, t, dir)
	r, pods, clientTLS, store := w.durable, w.pods, w.clientTLS, w.store
	cli, podsCli := client(t, r.Member, clientTLS), client(t, pods.Member, clientTLS)
	for _, k := range []string{"/registry/a", "/registry/b"} {
		if _, err := cli.Put(ctx, k, "before"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := podsCli.Put(ctx, "/registry/pods/default/p", "before"); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	info, err := store.Save(ctx, w.src, clientTLS, SnapshotName(OnDemandPrefix, "node-a", at), "node-a", "v1.32.5-k1m-test", at)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "on-demand-node-a-1700000000" || info.Node != "node-a" || info.K1mVersion != "v1.32.5-k1m-test" || info.Keys < 2 || len(info.SHA256) != 64 {
		t.Errorf("recorded %+v", info)
	}
	if len(info.Partitions) != 1 || info.Partitions[0].Name != "pods" || info.Partitions[0].Keys < 1 || len(info.Partitions[0].SHA256) != 64 {
		t.Errorf("recorded partitions %+v, want the pods partition", info.Partitions)
	}
	listed, err := store.List()
	if err != nil || !reflect.DeepEqual(listed, []SnapshotInfo{info}) {
		t.Fatalf("List() = %+v, %v; want the one saved %+v (its partition's part not listed apart)", listed, err, info)
	}
	// Changes after the snapshot, which the restore must undo.
	if _, err := cli.Delete(ctx, "/registry/a"); err != nil {
		t.Fatal(err)
	}
	after, err := cli.Put(ctx, "/registry/c", "after")
	if err != nil {
		t.Fatal(err)
	}
	podsAfter, err := podsCli.Put(ctx, "/registry/pods/default/p", "after")
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	pods.Stop()

	snapshotPath := filepath.Join(store.Dir, info.Name)
	kept, err := Restore(snapshotPath, r.Member, []Member{pods.Member})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || !strings.HasPrefix(kept[0], r.Member.DataDir+".before-restore-") || !strings.HasPrefix(kept[1], pods.Member.DataDir+".before-restore-") {
		t.Errorf("old data kept at %q, want the durable member's and the partition's", kept)
	}
	for _, k := range kept {
		if _, err := os.Stat(filepath.Join(k, "member")); err != nil {
			t.Errorf("old data not kept: %v", err)
		}
	}
	for _, c := range []struct {
		m      Member
		prefix string
		want   []string
		before int64
	}{
		{r.Member, "/registry/", []string{"/registry/a=before", "/registry/b=before"}, after.Header.Revision},
		{pods.Member, "/registry/pods/", []string{"/registry/pods/default/p=before"}, podsAfter.Header.Revision},
	} {
		restarted, err := Start(ctx, c.m)
		if err != nil {
			t.Fatal(err)
		}
		defer restarted.Stop()
		keys, revision := keysUnder(ctx, t, client(t, restarted.Member, clientTLS), c.prefix)
		if !reflect.DeepEqual(keys, c.want) {
			t.Errorf("%s after restore: %v, want %v", c.m.label(), keys, c.want)
		}
		// Watchers must see their resource versions as too old, never reused.
		if revision <= c.before+restoreRevisionBump/2 {
			t.Errorf("%s: revision after restore %d, want above %d (bumped)", c.m.label(), revision, c.before)
		}
	}
	if err := store.Delete(info.Name); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(store.Dir, "*")); len(left) != 0 {
		t.Errorf("after Delete: %v left, want nothing (the partition's part too)", left)
	}
}

// A snapshot restores only onto the partitions it holds: nothing changes
// when they differ.
func TestRestoreRefusesOtherPartitions(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWithPods(ctx, t, dir)
	r, pods, store := w.durable, w.pods, w.store
	info, err := store.Save(ctx, w.src, w.clientTLS, "with-pods", "n", "v", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	pods.Stop()
	path := filepath.Join(store.Dir, info.Name)
	_, err = Restore(path, r.Member, nil)
	want := fmt.Sprintf("snapshot %s: it holds the partitions pods, the server has none: restore it on a server started with --etcd-partitions=pods", path)
	if err == nil || err.Error() != want {
		t.Fatalf("Restore without the partition = %v, want %q", err, want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.restoring")); len(left) != 0 {
		t.Errorf("staging left behind: %v", left)
	}
	// A damaged part is found before anything is restored.
	if err := os.WriteFile(PartitionFile(path, "pods"), []byte("not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(path, r.Member, []Member{pods.Member}); err == nil || !strings.HasPrefix(err.Error(), "the pods partition's part: snapshot ") {
		t.Fatalf("Restore with a damaged part = %v, want the part named", err)
	}
}

func TestBadSnapshotChangesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, clientTLS := startMember(ctx, t, dir, freePortPair(t), 0)
	cli := client(t, r.Member, clientTLS)
	if _, err := cli.Put(ctx, "/registry/a", "x"); err != nil {
		t.Fatal(err)
	}
	store := Snapshots{Dir: filepath.Join(dir, "snapshots")}
	now := time.Now()
	info, err := store.Save(ctx, SnapshotSources{Durable: r.Member.ClientURL()}, clientTLS, SnapshotName(OnDemandPrefix, "n", now), "n", "v", now)
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	good, _ := os.ReadFile(filepath.Join(store.Dir, info.Name))
	for _, tc := range []struct {
		name, want string
		data       []byte
		record     bool // keep k1m's NAME.json beside it
	}{
		{"truncated", "is truncated or not an etcd snapshot", good[:len(good)-100], false},
		{"flipped-byte", "is corrupt: the SHA-256 etcd appended does not match", flip(good, 4096), false},
		{"flipped-byte-with-record", "is damaged: ", flip(good, 4096), true},
		{"not-a-snapshot", "is truncated or not an etcd snapshot", []byte("hello"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			os.WriteFile(path, tc.data, 0o600)
			if tc.record {
				meta, _ := os.ReadFile(filepath.Join(store.Dir, info.Name+metadataSuffix))
				os.WriteFile(path+metadataSuffix, meta, 0o600)
			}
			before := tree(t, r.Member.DataDir)
			_, err := Restore(path, r.Member, nil)
			if err == nil || !strings.Contains(err.Error(), path+" "+tc.want) {
				t.Fatalf("Restore(%s) = %v, want an error naming the file: %q", tc.name, err, tc.want)
			}
			if after := tree(t, r.Member.DataDir); !reflect.DeepEqual(before, after) {
				t.Errorf("data directory changed by a refused restore")
			}
			if _, err := os.Stat(r.Member.DataDir + ".restoring"); !os.IsNotExist(err) {
				t.Errorf("staging directory left: %v", err)
			}
		})
	}
}

func flip(data []byte, at int) []byte {
	out := append([]byte(nil), data...)
	out[at] ^= 0xff
	return out
}

// tree maps every file under dir to its size and modification time.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil {
			out[path] = fmt.Sprintf("%s %s %d", info.ModTime(), info.Mode(), info.Size())
		}
		return nil
	})
	return out
}

func TestPruneKeepsNewestOfOnePrefix(t *testing.T) {
	store := Snapshots{Dir: t.TempDir()}
	write := func(name string, at int64) {
		os.WriteFile(filepath.Join(store.Dir, name), []byte("x"), 0o600)
		os.Chtimes(filepath.Join(store.Dir, name), time.Unix(at, 0), time.Unix(at, 0))
	}
	for i, name := range []string{"etcd-snapshot-n-1", "etcd-snapshot-n-2", "on-demand-n-3", "etcd-snapshot-n-4", "etcd-snapshot-n-5"} {
		write(name, int64(1000+i))
	}
	deleted, err := store.Prune(ScheduledPrefix, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"etcd-snapshot-n-1", "etcd-snapshot-n-2"}; !reflect.DeepEqual(deleted, want) {
		t.Errorf("pruned %v, want %v", deleted, want)
	}
	left, _ := store.List()
	var names []string
	for _, s := range left {
		names = append(names, s.Name)
	}
	if want := []string{"on-demand-n-3", "etcd-snapshot-n-4", "etcd-snapshot-n-5"}; !reflect.DeepEqual(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
	if err := store.Delete("../etc"); err == nil {
		t.Error("Delete accepted a path outside the directory")
	}
	if err := store.Delete("on-demand-n-9"); err == nil || err.Error() != "no snapshot on-demand-n-9 in "+store.Dir {
		t.Errorf("Delete of a missing snapshot: %v", err)
	}
	if _, err := store.Prune(ScheduledPrefix, 0); err == nil {
		t.Error("Prune kept nothing without complaint")
	}
}

func TestCheckSnapshotPrefix(t *testing.T) {
	for _, ok := range []string{"on-demand", "before-upgrade", "a"} {
		if err := CheckSnapshotPrefix(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Upper", "a/b", "-x", "x-", "..", strings.Repeat("a", 41)} {
		if err := CheckSnapshotPrefix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A clock set forward for one snapshot, then back: the later snapshots
// hold higher revisions and are kept; the one with the wrong time, the
// oldest by revision, goes first.
func TestPruneByRevisionNotClock(t *testing.T) {
	store := Snapshots{Dir: t.TempDir()}
	year := 365 * 24 * time.Hour
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range []SnapshotInfo{
		{Name: "etcd-snapshot-n-1", Revision: 100, CreatedAt: base.Add(year)}, // the clock a year ahead
		{Name: "etcd-snapshot-n-2", Revision: 200, CreatedAt: base.Add(time.Hour)},
		{Name: "etcd-snapshot-n-3", Revision: 300, CreatedAt: base.Add(2 * time.Hour)},
		{Name: "etcd-snapshot-n-4", Revision: 400, CreatedAt: base.Add(3 * time.Hour)},
	} {
		os.WriteFile(filepath.Join(store.Dir, s.Name), []byte{byte(i)}, 0o600)
		data, _ := json.Marshal(s)
		os.WriteFile(filepath.Join(store.Dir, s.Name+metadataSuffix), data, 0o600)
	}
	deleted, err := store.Prune(ScheduledPrefix, 3)
	if want := []string{"etcd-snapshot-n-1"}; err != nil || !reflect.DeepEqual(deleted, want) {
		t.Errorf("pruned %v, %v; want %v", deleted, err, want)
	}
}
