package server

import (
	"reflect"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/etcd"
)

func TestIncarnationRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := readIncarnation(dir); ok || err != nil {
		t.Fatalf("no record: ok %t, %v", ok, err)
	}
	want := incarnationRecord{Incarnation: etcd.Incarnation{ID: "aaaa", How: "created", At: time.Unix(1_700_000_000, 0).UTC()},
		Peers: []string{"https://[fddf:4035:b520::1:2]:2379"}}
	if err := writeIncarnation(dir, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := readIncarnation(dir)
	if !ok || err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, %t, %v; want %+v", got, ok, err, want)
	}
}

// A server whose data the cluster's restore replaced is refused, and so
// is a restored server while a server of the old incarnation runs; each
// message names both incarnations and what to do.
func TestFenceError(t *testing.T) {
	at := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	old := etcd.Incarnation{ID: "aaaa", How: "created", At: at}
	restored := etcd.Incarnation{ID: "bbbb", Replaces: "aaaa", How: "restored from /snap", At: at.Add(time.Hour)}
	const peer = "https://[fddf:4035:b520::1:1]:2379"
	if err := fenceError("/d", "k1m-server-2", old, peer, old); err != nil {
		t.Errorf("same incarnation: %v", err)
	}
	for _, c := range []struct {
		name         string
		mine, theirs etcd.Incarnation
		want         string
	}{
		{"stale data", old, restored, "this server's data (/d) is of incarnation aaaa (created at 2026-11-25T04:00:00Z), but the durable etcd at " + peer +
			" runs incarnation bbbb (restored from /snap at 2026-11-25T05:00:00Z): the cluster was restored or reset since, and this data is the cluster as it was before, which must not rejoin it; " +
			"on a running server run k1m server remove k1m-server-2, then move /d away and start this server with an empty --data-dir, --server and --token (docs/operations.md, \"Restoring a cluster of several servers\")"},
		{"old server still running", restored, old, "the durable etcd at " + peer + " still runs incarnation aaaa (created at 2026-11-25T04:00:00Z), which this server's bbbb (restored from /snap at 2026-11-25T05:00:00Z) replaced: " +
			"stop every other server before the restored one starts; once it runs, each rejoins it with an empty --data-dir (docs/operations.md, \"Restoring a cluster of several servers\")"},
	} {
		if err := fenceError("/d", "k1m-server-2", c.mine, peer, c.theirs); err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.name, err, c.want)
		}
	}
}
