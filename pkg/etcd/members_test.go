package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterMember is member name of a raft cluster on ::1 in dir.
func clusterMember(t *testing.T, dir, name string, tls TLS) Member {
	return Member{Name: name, DataDir: filepath.Join(dir, name), Host: "::1", PeerHost: "::1", Port: freePortPair(t), TLS: tls}
}

func logf(t *testing.T) func(string) { return func(msg string) { t.Log(msg) } }

// startFirst starts the first member of a raft cluster, stopped when the
// test ends.
func startFirst(ctx context.Context, t *testing.T, dir, name string, tls TLS) (Member, *Running) {
	t.Helper()
	m := clusterMember(t, dir, name, tls)
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return m, r
}

// joinAndPromote is what a joining server does with its member.
func joinAndPromote(ctx context.Context, t *testing.T, seeds []string, clientTLS TLS, m Member) *Running {
	t.Helper()
	joined, err := Join(ctx, seeds, clientTLS, m, logf(t))
	if err != nil {
		t.Fatalf("Join %s: %v", m.Name, err)
	}
	r, err := Start(ctx, joined)
	if err != nil {
		t.Fatalf("Start %s: %v", m.Name, err)
	}
	t.Cleanup(r.Stop)
	if err := r.Promote(ctx, seeds, clientTLS, logf(t)); err != nil {
		t.Fatalf("Promote %s: %v", m.Name, err)
	}
	if r.IsLearner() {
		t.Fatalf("%s is still a learner after Promote", m.Name)
	}
	return r
}

type memberView struct {
	Name      string
	IsLearner bool
}

func view(ctx context.Context, t *testing.T, cli *clientv3.Client) []memberView {
	t.Helper()
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	var out []memberView
	for _, m := range members {
		out = append(out, memberView{m.Name, m.IsLearner})
	}
	return out
}

// TestRaftClusterJoinLoseRejoinRemove grows a member to a three-member
// raft cluster the way servers join (learner, then promoted), loses one,
// refuses what would break the quorum or duplicate a name, and brings the
// lost one back with and without its data.
func TestRaftClusterJoinLoseRejoinRemove(t *testing.T) {
	// Parallel: it waits on its members most of its time (tens of seconds).
	t.Parallel()
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	a, _ := startFirst(ctx, t, dir, "server-a", serverTLS)
	seeds := []string{a.AdvertisedClientURL()}
	b, c := clusterMember(t, dir, "server-b", serverTLS), clusterMember(t, dir, "server-c", serverTLS)
	rb := joinAndPromote(ctx, t, seeds, clientTLS, b)
	joinAndPromote(ctx, t, seeds, clientTLS, c)

	all := []string{a.ClientURL(), b.ClientURL(), c.ClientURL()}
	cli, err := NewClient(all, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	want := []memberView{{"server-a", false}, {"server-b", false}, {"server-c", false}}
	if got := view(ctx, t, cli); !reflect.DeepEqual(got, want) {
		t.Fatalf("members %+v, want %+v", got, want)
	}
	put := func(key string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := cli.Put(wctx, key, "v"); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put("/before")

	// b stops: two of three still make a quorum.
	rb.Stop()
	put("/while-b-is-down")
	err = Remove(ctx, []string{a.ClientURL()}, clientTLS, "server-c", nil)
	wantErr := "removing server-c would leave 2 voting etcd members of which 1 answer (server-b silent): a quorum needs 2; bring a member back first"
	if err == nil || err.Error() != wantErr {
		t.Errorf("Remove server-c with server-b down: %v, want %q", err, wantErr)
	}
	dup := clusterMember(t, dir, "server-c", serverTLS)
	dup.DataDir = filepath.Join(dir, "duplicate")
	_, err = Join(ctx, seeds, clientTLS, dup, logf(t))
	if !errors.Is(err, ErrDuplicateName) {
		t.Errorf("Join of a second server-c: %v, want ErrDuplicateName", err)
	}
	if got := view(ctx, t, cli); !reflect.DeepEqual(got, want) {
		t.Errorf("after the refusals: members %+v, want %+v", got, want)
	}

	// b comes back with its data: a plain start, and it has what was
	// written while it was down.
	rb, err = Start(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	requireKey(ctx, t, b, clientTLS, "/while-b-is-down")
	rb.Stop()

	// b comes back without its data: its old entry is replaced.
	if err := DiscardData(b.DataDir); err != nil {
		t.Fatal(err)
	}
	joinAndPromote(ctx, t, []string{a.ClientURL(), c.ClientURL()}, clientTLS, b)
	requireKey(ctx, t, b, clientTLS, "/before")
	if got := view(ctx, t, cli); !reflect.DeepEqual(got, want) {
		t.Errorf("after b rejoined without data: members %+v, want %+v", got, want)
	}

	// With all three answering, c can go.
	if err := Remove(ctx, []string{a.ClientURL()}, clientTLS, "server-c", nil); err != nil {
		t.Fatalf("Remove server-c: %v", err)
	}
	want = []memberView{{"server-a", false}, {"server-b", false}}
	if got := view(ctx, t, cli); !reflect.DeepEqual(got, want) {
		t.Errorf("after removing server-c: members %+v, want %+v", got, want)
	}
	err = Remove(ctx, []string{a.ClientURL()}, clientTLS, "server-z", nil)
	if !errors.Is(err, ErrNoSuchMember) || err.Error() != `no such member: no etcd member is called "server-z" (members: server-a, server-b)` {
		t.Errorf("Remove of an unknown member: %v", err)
	}
	err = Remove(ctx, []string{a.ClientURL()}, clientTLS, "server-a", nil)
	if err == nil || err.Error() != "server-a is the server this runs on (its etcd at "+a.ClientURL()+"): run the removal on another server" {
		t.Errorf("Remove of the member it runs on: %v", err)
	}
}

func requireKey(ctx context.Context, t *testing.T, m Member, tls TLS, key string) {
	t.Helper()
	cli, err := NewClient([]string{m.ClientURL()}, tls)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := cli.Get(rctx, key, clientv3.WithSerializable())
		cancel()
		if err == nil && resp.Count == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s: %v, %s", key, m.Name, err, describeCount(resp))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func describeCount(resp *clientv3.GetResponse) string {
	if resp == nil {
		return "no response"
	}
	return fmt.Sprintf("%d keys", resp.Count)
}

// A lone server's member advertises a loopback peer URL; --cluster-init on
// its data moves the entry to the address peers reach.
func TestSetPeerURLMovesALoneMember(t *testing.T) {
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lone := Member{Name: "durable", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS}
	r, err := Start(ctx, lone)
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	moved := lone
	moved.PeerHost = "127.0.0.1"
	r, err = Start(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	changed, err := r.SetPeerURL(ctx, clientTLS)
	if err != nil || !changed {
		t.Fatalf("SetPeerURL: %v, %v; want a change", changed, err)
	}
	cli, _ := NewClient([]string{lone.ClientURL()}, clientTLS)
	defer cli.Close()
	members, err := Members(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || !reflect.DeepEqual(members[0].PeerURLs, []string{moved.PeerURL()}) {
		t.Errorf("members %+v, want one with peer URL %s", members, moved.PeerURL())
	}
	if changed, err := r.SetPeerURL(ctx, clientTLS); err != nil || changed {
		t.Errorf("second SetPeerURL: %v, %v; want no change", changed, err)
	}
}

// A join that stopped before etcd wrote its log leaves member/snap only:
// that is no data to restart from (a retry joins again).
func TestHasDataMeansAWriteAheadLog(t *testing.T) {
	dir := t.TempDir()
	serverTLS, _ := certs(t, dir)
	m := Member{Name: "durable", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS}
	if err := os.MkdirAll(filepath.Join(m.DataDir, "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	if HasData(m.DataDir) {
		t.Error("HasData with member/snap only: true, want false")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	if !HasData(m.DataDir) {
		t.Error("HasData after a start: false, want true")
	}
}

// A joining server whose advertise address is another live member's (a
// wrong --advertise-address) must not take that member's place: only an
// entry of its own name, or a learner that never started (its own join
// stopped half-way), is its own from before.
func TestJoinRefusesAPeerURLOfAnotherMember(t *testing.T) {
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, _ := startFirst(ctx, t, dir, "server-a", serverTLS)
	seeds := []string{a.AdvertisedClientURL()}
	c := clusterMember(t, dir, "server-c", serverTLS)
	joinAndPromote(ctx, t, seeds, clientTLS, c)

	wrong := clusterMember(t, dir, "server-b", serverTLS)
	wrong.Port = c.Port // its peer URL is server-c's
	_, err := Join(ctx, seeds, clientTLS, wrong, logf(t))
	wantErr := `peer URL taken: etcd member "server-c" (a running server, not this one) already has peer URL ` + c.PeerURL() +
		`: each server needs an address of its own`
	if !errors.Is(err, ErrPeerURLTaken) || err.Error() != wantErr {
		t.Errorf("Join at server-c's peer URL: %v, want %q", err, wantErr)
	}
	cli, err := NewClient(seeds, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	want := []memberView{{"server-a", false}, {"server-c", false}}
	if got := view(ctx, t, cli); !reflect.DeepEqual(got, want) {
		t.Errorf("after the refused join: members %+v, want %+v", got, want)
	}
}

// fakeViews answers each member's view from a script: the error, a
// member that never answers, or how many asks before the member lists the
// learner. Members are asked at once, so the counts are locked.
type fakeViews struct {
	listsAfter map[string]int   // member -> asks that do not list the learner yet
	fail       map[string]error // member -> error on every ask
	silent     map[string]bool  // member -> answers nothing until the ask ends
	mu         sync.Mutex
	asked      map[string]int
}

func (f *fakeViews) view(learner uint64) membersSeen {
	return func(ctx context.Context, m MemberInfo) ([]uint64, error) {
		f.mu.Lock()
		f.asked[m.Name]++
		n := f.asked[m.Name]
		f.mu.Unlock()
		switch {
		case f.silent[m.Name]:
			<-ctx.Done()
			return nil, ctx.Err()
		case f.fail[m.Name] != nil:
			return nil, f.fail[m.Name]
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case n > f.listsAfter[m.Name]:
			return []uint64{1, 2, 3, learner}, nil
		}
		return []uint64{1, 2, 3}, nil
	}
}

func TestAwaitAddApplied(t *testing.T) {
	const learner = 9
	members := []MemberInfo{
		{ID: 1, Name: "k1m-server-1"},
		{ID: 2, Name: "k1m-server-2"},
		{ID: 3, Name: "k1m-server-3"},
		{ID: 7},       // another learner, not started: not asked
		{ID: learner}, // the learner itself: not asked
	}
	cases := []struct {
		name       string
		listsAfter map[string]int
		fail       map[string]error
		silent     map[string]bool
		wait       appliedWait
		want       []string
		wantAsked  map[string]int
		askedAgain string // asked until the time is up: at least twice, how often depends on the machine
	}{
		{
			name:      "all have applied it",
			wait:      appliedWait{Wait: time.Second, Ask: time.Second},
			wantAsked: map[string]int{"k1m-server-1": 1, "k1m-server-2": 1, "k1m-server-3": 1},
		},
		{
			name:       "one member applies it late: asked again until it lists the learner",
			listsAfter: map[string]int{"k1m-server-2": 3},
			wait:       appliedWait{Wait: 5 * time.Second, Ask: time.Second},
			wantAsked:  map[string]int{"k1m-server-1": 1, "k1m-server-2": 4, "k1m-server-3": 1},
		},
		{
			name:      "one member fails: named, not asked again",
			fail:      map[string]error{"k1m-server-1": errors.New("connection refused")},
			wait:      appliedWait{Wait: time.Second, Ask: time.Second},
			want:      []string{"etcd member k1m-server-1 did not say whether it has applied the addition (connection refused)"},
			wantAsked: map[string]int{"k1m-server-1": 1, "k1m-server-2": 1, "k1m-server-3": 1},
		},
		{
			name:      "one member answers nothing: named after one ask, the others still asked",
			silent:    map[string]bool{"k1m-server-1": true},
			wait:      appliedWait{Wait: 5 * time.Second, Ask: 200 * time.Millisecond},
			want:      []string{"etcd member k1m-server-1 did not say whether it has applied the addition (context deadline exceeded)"},
			wantAsked: map[string]int{"k1m-server-1": 1, "k1m-server-2": 1, "k1m-server-3": 1},
		},
		{
			name:       "one member never lists it: named when the time is up",
			listsAfter: map[string]int{"k1m-server-3": 1 << 30},
			wait:       appliedWait{Wait: 250 * time.Millisecond, Ask: time.Second},
			want:       []string{"etcd member k1m-server-3 had not applied the addition after 250ms"},
			wantAsked:  map[string]int{"k1m-server-1": 1, "k1m-server-2": 1},
			askedAgain: "k1m-server-3",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeViews{listsAfter: tc.listsAfter, fail: tc.fail, silent: tc.silent, asked: map[string]int{}}
			got := awaitAddApplied(context.Background(), members, learner, f.view(learner), tc.wait)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("awaitAddApplied = %q, want %q", got, tc.want)
			}
			if tc.askedAgain != "" {
				if n := f.asked[tc.askedAgain]; n < 2 {
					t.Errorf("%s asked %d times before the time was up, want it asked again", tc.askedAgain, n)
				}
				delete(f.asked, tc.askedAgain)
			}
			if !reflect.DeepEqual(f.asked, tc.wantAsked) {
				t.Errorf("members asked %v, want %v", f.asked, tc.wantAsked)
			}
		})
	}
}

// A server whose join added its learner and whose etcd then failed to
// start leaves an entry with no name. The removal of that server finds it
// by the server's peer host, and leaves it alone for any other host.
func TestRemoveFindsTheLearnerOfAServerThatNeverStarted(t *testing.T) {
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, _ := startFirst(ctx, t, dir, "server-a", serverTLS)
	cli, err := NewClient([]string{a.ClientURL()}, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := addLearner(ctx, cli, "https://[fd00:99::2]:2380"); err != nil {
		t.Fatal(err)
	}
	withLearner := []memberView{{"", true}, {"server-a", false}}
	if got := view(ctx, t, cli); !reflect.DeepEqual(got, withLearner) {
		t.Fatalf("members %+v, want %+v", got, withLearner)
	}
	for _, hosts := range [][]string{nil, {"fd00:99::3"}} {
		err := Remove(ctx, []string{a.ClientURL()}, clientTLS, "server-b", hosts)
		if !errors.Is(err, ErrNoSuchMember) {
			t.Errorf("Remove server-b at %v: %v, want ErrNoSuchMember", hosts, err)
		}
	}
	if got := view(ctx, t, cli); !reflect.DeepEqual(got, withLearner) {
		t.Fatalf("after the refusals: members %+v, want %+v", got, withLearner)
	}
	if err := Remove(ctx, []string{a.ClientURL()}, clientTLS, "server-b", []string{"fd00:99::2"}); err != nil {
		t.Fatalf("Remove server-b at its peer host: %v", err)
	}
	if got, want := view(ctx, t, cli), []memberView{{"server-a", false}}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the removal: members %+v, want %+v", got, want)
	}
}

func TestPeerHostsAreTheNamedMembersHosts(t *testing.T) {
	members := []MemberInfo{
		{Name: "server-a", PeerURLs: []string{"https://[fd00::1]:2380", "https://[fd00::1]:2390", "https://10.0.0.1:2380"}},
		{Name: "server-b", PeerURLs: []string{"https://[fd00::2]:2380"}},
	}
	if got, want := PeerHosts(members, "server-a"), []string{"fd00::1", "10.0.0.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("PeerHosts server-a: %v, want %v", got, want)
	}
	if got := PeerHosts(members, "server-z"); got != nil {
		t.Errorf("PeerHosts of no member: %v, want nil", got)
	}
}
