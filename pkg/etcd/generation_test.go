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

func TestStartRevisionIsTheClockAndAboveThePreviousStart(t *testing.T) {
	now := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		prev Generation
		want int64
	}{
		{"first generation", Generation{}, now.UnixMicro()},
		{"previous started long ago", Generation{Number: 3, Revision: now.Add(-time.Hour).UnixMicro()}, now.UnixMicro()},
		{"this clock behind the previous starter's", Generation{Number: 3, Revision: now.Add(time.Minute).UnixMicro()}, now.Add(time.Minute).UnixMicro() + minRevisionStep},
	} {
		if got := startRevision(tc.prev, now); got != tc.want {
			t.Errorf("%s: startRevision = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// noFsyncFixture is a durable etcd and the no-fsync members of three
// servers, as a multi-server cluster has them.
type noFsyncFixture struct {
	t         *testing.T
	ctx       context.Context
	durable   *clientv3.Client
	clientTLS TLS
	members   []Member
}

func newNoFsyncFixture(ctx context.Context, t *testing.T) *noFsyncFixture {
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	d := Member{Name: "durable", DataDir: filepath.Join(dir, "durable"), Host: "::1", Port: freePortPair(t), TLS: serverTLS}
	rd, err := Start(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Stop)
	cli, err := NewClient([]string{d.ClientURL()}, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	f := &noFsyncFixture{t: t, ctx: ctx, durable: cli, clientTLS: clientTLS}
	for _, name := range []string{"server-a", "server-b", "server-c"} {
		m := clusterMember(t, dir, name, serverTLS)
		m.NoFsync = true
		f.members = append(f.members, m)
	}
	return f
}

// start starts server i's member, empty, and has it follow the generation
// at test speed; it is stopped when the test ends.
func (f *noFsyncFixture) start(i int) *NoFsyncMember {
	f.t.Helper()
	m := f.members[i]
	if err := DiscardData(m.DataDir); err != nil {
		f.t.Fatal(err)
	}
	n, err := StartNoFsync(f.ctx, f.durable, m, f.clientTLS, logf(f.t))
	if err != nil {
		f.t.Fatalf("StartNoFsync %s: %v", m.Name, err)
	}
	n.interval, n.quorumLoss = 200*time.Millisecond, 3*time.Second
	fctx, stop := context.WithCancel(f.ctx)
	go n.Follow(fctx)
	f.t.Cleanup(func() { stop(); n.Stop() })
	return n
}

func (f *noFsyncFixture) put(n *NoFsyncMember, key string) int64 {
	f.t.Helper()
	cli, err := NewClient([]string{n.Member().ClientURL()}, f.clientTLS)
	if err != nil {
		f.t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Put(f.ctx, key, "v")
	if err != nil {
		f.t.Fatalf("put %s through %s: %v", key, n.Member().Name, err)
	}
	return resp.Header.Revision
}

// requireOneGroup waits until every member is in generation want of one
// group of all of them, and the durable etcd records that generation.
func (f *noFsyncFixture) requireOneGroup(want int64, ns ...*NoFsyncMember) {
	f.t.Helper()
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.Member().Name
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var problems []string
		if g, err := ReadGeneration(f.ctx, f.durable); err != nil || g.Number != want {
			problems = append(problems, "recorded "+g.String())
		}
		for _, n := range ns {
			if got := n.Generation().Number; got != want {
				problems = append(problems, n.Member().Name+" in another generation")
				continue
			}
			if got := groupNames(f.ctx, n, f.clientTLS); !reflect.DeepEqual(got, names) {
				problems = append(problems, n.Member().Name+" sees members "+joinNames(got))
			}
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("not one group of %v in generation %d: %v", names, want, problems)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func groupNames(ctx context.Context, n *NoFsyncMember, tls TLS) []string {
	cli, err := NewClient([]string{n.Member().ClientURL()}, tls)
	if err != nil {
		return nil
	}
	defer cli.Close()
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	members, err := Members(mctx, cli)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range members {
		out = append(out, m.Name)
	}
	return out
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return "[" + out + "]"
}

// TestNoFsyncMaintenancePlusRebootKeepsOneGroup is the sequence that split
// the store: server c stopped for maintenance; server b restarted while c
// is down (b's empty member cannot join a group of which one member of
// three runs, so it starts the next generation); c starts again. Server
// a, left alone in the old group, must move to the new one by itself,
// and a watch at the old group's revision must be told to list again.
func TestNoFsyncMaintenancePlusRebootKeepsOneGroup(t *testing.T) {
	// Parallel: it waits on its members most of its time (tens of seconds).
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := newNoFsyncFixture(ctx, t)
	a, b, c := f.start(0), f.start(1), f.start(2)
	f.requireOneGroup(1, a, b, c)
	oldRevision := f.put(a, "/registry/leases/kube-node-lease/node-1")

	c.Stop()
	b.Stop()
	b = f.start(1)
	if got := b.Generation().Number; got != 2 {
		t.Fatalf("b restarted while c was down entered generation %d, want 2 (a new group)", got)
	}
	c = f.start(2)
	f.requireOneGroup(2, a, b, c)

	newRevision := f.put(a, "/registry/leases/kube-node-lease/node-1")
	if newRevision <= oldRevision {
		t.Errorf("the new group's store is at revision %d, not above the old one's %d", newRevision, oldRevision)
	}
	cli, err := NewClient([]string{a.Member().ClientURL()}, f.clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	resp := <-cli.Watch(wctx, "/registry/leases/", clientv3.WithPrefix(), clientv3.WithRev(oldRevision+1))
	if !errors.Is(resp.Err(), rpctypes.ErrCompacted) {
		t.Errorf("a watch resumed at the old group's revision %d: %v, want %v (so that kube-apiserver lists again)", oldRevision+1, resp.Err(), rpctypes.ErrCompacted)
	}
	select {
	case err := <-a.Err():
		t.Errorf("a's member was replaced, yet Err reported %v", err)
	default:
	}
}

// TestNoFsyncGroupWithoutQuorumIsReplaced: the members of two servers
// stop (their servers gone) while a's server runs; a's group can take no
// writes, so a starts the next generation on its own, and the servers,
// started again, join it.
func TestNoFsyncGroupWithoutQuorumIsReplaced(t *testing.T) {
	// Parallel: it waits on its members most of its time (tens of seconds).
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := newNoFsyncFixture(ctx, t)
	a, b, c := f.start(0), f.start(1), f.start(2)
	f.requireOneGroup(1, a, b, c)
	b.Stop()
	c.Stop()
	f.requireOneGroup(2, a)
	if err := a.Current(ctx); err != nil {
		t.Fatalf("a alone in the new generation: Current = %v, want nil", err)
	}
	b, c = f.start(1), f.start(2)
	f.requireOneGroup(2, a, b, c)
}

// TestNoFsyncLiveGroupIsNotReplaced: a group that still has a quorum is
// never replaced; a member that stopped comes back into it.
func TestNoFsyncLiveGroupIsNotReplaced(t *testing.T) {
	// Parallel: it waits on its members most of its time (tens of seconds).
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := newNoFsyncFixture(ctx, t)
	a, b, c := f.start(0), f.start(1), f.start(2)
	f.requireOneGroup(1, a, b, c)
	c.Stop()
	if !groupTakesWrites(ctx, []string{a.Member().ClientURL(), b.Member().ClientURL()}, f.clientTLS) {
		t.Fatal("two of three members: groupTakesWrites = false, want true")
	}
	time.Sleep(4 * time.Second) // past quorumLoss: nothing may change
	c = f.start(2)
	f.requireOneGroup(1, a, b, c)
}
