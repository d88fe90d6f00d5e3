package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"k1m.dev/k1m/pkg/clock"
)

// The no-fsync store of a multi-server cluster is a raft cluster too, so
// that Leases and Events survive the loss of a server. Its members start
// empty at every start (their files are not trusted after a stop), so a
// starting member always joins the others' group, or starts the next
// generation of it when the group can take no writes (generation.go).
// The durable etcd, which has a quorum, decides: it serialises servers
// starting at once and records the generation and where each of its
// members is, under NoFsyncPrefix (outside kube-apiserver's /registry;
// the key keeps the name earlier releases wrote it under, so that servers
// of two releases find each other's records during a rolling upgrade).
const NoFsyncPrefix = "/k1m/ephemeral-etcd/"

func noFsyncMemberKey(name string) string { return NoFsyncPrefix + "members/" + name }

// Every wait on the way into the group has a deadline, so that a server
// holding the start lock never keeps the others out for long.
const (
	// noFsyncJoinTimeout bounds the attempt to be added to the current
	// group as a learner.
	noFsyncJoinTimeout = 30 * time.Second
	// noFsyncPromoteTimeout bounds the learner's catching up: the group
	// holds Leases and Events only, which a learner gets in seconds.
	noFsyncPromoteTimeout = 60 * time.Second
	// noFsyncLockTimeout bounds the wait for the start lock; its holder's
	// own waits are bounded above, and a holder that died loses it with
	// its session (30 s).
	noFsyncLockTimeout = 3 * time.Minute
	// noFsyncEnterRetry is the pause between attempts when the current
	// group answers but does not take this member yet.
	noFsyncEnterRetry = 5 * time.Second
	// noFsyncEnterTimeout bounds every attempt together.
	noFsyncEnterTimeout = 5 * time.Minute
)

// errGroupAlive says the current group takes writes but did not take this
// member: no new generation may start; try again.
var errGroupAlive = errors.New("the no-fsync group takes writes but did not take this member")

// StartNoFsync starts m, a server's no-fsync member, in the current
// no-fsync group: it joins the group's members when they take it, and
// starts the next generation (empty, every other member forgotten) only
// when the group can take no writes (every server stopped at once, or too
// few of its members left): Leases and Events start over, as a lone
// server's do. durable is a client of the durable etcd, which decides
// (it must stay open while the member runs: Follow reads it); clientTLS
// is the client certificate the no-fsync members accept.
func StartNoFsync(ctx context.Context, durable *clientv3.Client, m Member, clientTLS TLS, report func(string)) (*NoFsyncMember, error) {
	n := &NoFsyncMember{durable: durable, member: m, tls: clientTLS, report: report, errc: make(chan error, 1),
		interval: followInterval, quorumLoss: quorumLossTimeout}
	if err := n.enter(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// enter puts the member into the current group, trying again while the
// group answers but does not take it yet, until noFsyncEnterTimeout.
func (n *NoFsyncMember) enter(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, noFsyncEnterTimeout)
	defer cancel()
	for {
		if n.isStopped() {
			return errors.New("stopped")
		}
		r, g, err := n.attempt(ctx)
		if err == nil {
			n.install(r, g)
			return nil
		}
		if !errors.Is(err, errGroupAlive) && !errors.Is(err, ErrGenerationMoved) {
			return err
		}
		n.report(fmt.Sprintf("%s: %v; trying again in %s", n.member.label(), err, noFsyncEnterRetry))
		if err := clock.Sleep(ctx, noFsyncEnterRetry); err != nil {
			return fmt.Errorf("%s: not in the no-fsync group after %s: %w", n.member.label(), noFsyncEnterTimeout, err)
		}
	}
}

// attempt makes one try, under the start lock: join the current group,
// or start the next generation when it can take no writes.
func (n *NoFsyncMember) attempt(ctx context.Context) (*Running, Generation, error) {
	unlock, err := lockNoFsync(ctx, n.durable, n.member)
	if err != nil {
		return nil, Generation{}, err
	}
	defer unlock()
	g, err := ReadGeneration(ctx, n.durable)
	if err != nil {
		return nil, Generation{}, err
	}
	others, err := noFsyncMembers(ctx, n.durable, n.member.Name)
	if err != nil {
		return nil, Generation{}, err
	}
	if len(others) > 0 {
		if err := DiscardData(n.member.DataDir); err != nil {
			return nil, Generation{}, err
		}
		r, joinErr := joinNoFsync(ctx, others, n.member, n.tls, n.report)
		if r != nil {
			if err := recordNoFsync(ctx, n.durable, n.member); err != nil {
				r.Stop()
				return nil, Generation{}, err
			}
			n.report(fmt.Sprintf("%s: in no-fsync %s", n.member.label(), g))
			return r, g, nil
		}
		if ctx.Err() != nil {
			return nil, Generation{}, joinErr
		}
		if groupTakesWrites(ctx, others, n.tls) {
			return nil, Generation{}, fmt.Errorf("%w (%s: %v)", errGroupAlive, strings.Join(others, ", "), joinErr)
		}
		n.report(fmt.Sprintf("%s: the members of no-fsync %s (%s) take no writes (%v): starting the next generation; Leases and Events start over",
			n.member.label(), g, strings.Join(others, ", "), joinErr))
	}
	next, err := nextGeneration(ctx, n.durable, g, n.member.Name, time.Now())
	if err != nil {
		return nil, Generation{}, err
	}
	// A token of its own: a member of an earlier no-fsync cluster (a
	// server that kept running through a restore on another) is refused
	// by its cluster ID instead of taking this member into its group.
	first := n.member
	token, err := randomID()
	if err != nil {
		return nil, Generation{}, err
	}
	first.ClusterToken = "k1m-nofsync-" + token
	r, err := startEmptyAt(ctx, first, n.tls, next.Revision)
	if err != nil {
		return nil, Generation{}, err
	}
	if err := recordNoFsync(ctx, n.durable, n.member); err != nil {
		r.Stop()
		return nil, Generation{}, err
	}
	n.report(fmt.Sprintf("%s: started no-fsync %s, its store at revision %d", n.member.label(), next, next.Revision))
	return r, next, nil
}

// lockNoFsync takes the start lock in the durable etcd, which serialises
// servers entering the group; it returns the release.
func lockNoFsync(ctx context.Context, durable *clientv3.Client, m Member) (func(), error) {
	session, err := concurrency.NewSession(durable, concurrency.WithTTL(30), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s: a session with the durable etcd: %w", m.label(), err)
	}
	lctx, cancel := context.WithTimeout(ctx, noFsyncLockTimeout)
	defer cancel()
	lock := concurrency.NewMutex(session, NoFsyncPrefix+"lock")
	if err := lock.Lock(lctx); err != nil {
		session.Close()
		return nil, fmt.Errorf("%s: taking the no-fsync start lock in the durable etcd (waited up to %s): %w", m.label(), noFsyncLockTimeout, err)
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		lock.Unlock(uctx)
		session.Close()
	}, nil
}

// joinNoFsync joins the members at seeds, each step bounded; a nil
// Running with an error means they did not take m, and nothing of m is
// left running or listed in their group.
func joinNoFsync(ctx context.Context, seeds []string, m Member, clientTLS TLS, report func(string)) (*Running, error) {
	jctx, cancel := context.WithTimeout(ctx, noFsyncJoinTimeout)
	joined, err := Join(jctx, seeds, clientTLS, m, report)
	cancel()
	if err != nil {
		return nil, err
	}
	// A learner is ready once it has the group's log: bounded too, as
	// the group may lose its quorum meanwhile.
	sctx, cancel := context.WithTimeout(ctx, noFsyncJoinTimeout)
	r, err := Start(sctx, joined)
	cancel()
	if err != nil {
		forgetLearner(seeds, clientTLS, m, report)
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, noFsyncPromoteTimeout)
	defer cancel()
	if err := r.Promote(pctx, seeds, clientTLS, report); err != nil {
		r.Stop()
		forgetLearner(seeds, clientTLS, m, report)
		return nil, fmt.Errorf("not promoted within %s: %w", noFsyncPromoteTimeout, err)
	}
	return r, nil
}

// forgetLearner removes m from the group at seeds after a failed join,
// so that the learner slot (etcd takes one at a time) is free for the
// next server. Best effort: a group without quorum cannot remove it, and
// is replaced as a whole.
func forgetLearner(seeds []string, clientTLS TLS, m Member, report func(string)) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cli, err := NewClient(seeds, clientTLS)
	if err != nil {
		return
	}
	defer cli.Close()
	members, err := Members(ctx, cli)
	if err != nil {
		return
	}
	for _, other := range members {
		if slices.Contains(other.PeerURLs, m.PeerURL()) && removeMember(ctx, cli, other.ID) == nil {
			report(fmt.Sprintf("%s: removed its unfinished learner entry (id %x) from the group", m.label(), other.ID))
		}
	}
}

// groupTakesWrites tells whether the members at endpoints still form a
// group with a quorum: one of them answers a linearizable read, which
// needs the leader and a majority, as a write does.
func groupTakesWrites(ctx context.Context, endpoints []string, clientTLS TLS) bool {
	for _, ep := range endpoints {
		if memberTakesWrites(ctx, ep, clientTLS) == nil {
			return true
		}
	}
	return false
}

// quorumCheckTimeout bounds a linearizable read that checks a quorum.
const quorumCheckTimeout = 3 * time.Second

func memberTakesWrites(ctx context.Context, endpoint string, clientTLS TLS) error {
	cli, err := NewClient([]string{endpoint}, clientTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	gctx, cancel := context.WithTimeout(ctx, quorumCheckTimeout)
	defer cancel()
	_, err = cli.Get(gctx, NoFsyncPrefix+"quorum-check")
	return err
}

// noFsyncMembers are the recorded client URLs of the other servers'
// no-fsync members.
func noFsyncMembers(ctx context.Context, durable *clientv3.Client, self string) ([]string, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Get(gctx, NoFsyncPrefix+"members/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading where the no-fsync members are (durable etcd %s): %w", NoFsyncPrefix, err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		if string(kv.Key) != noFsyncMemberKey(self) {
			out = append(out, string(kv.Value))
		}
	}
	sort.Strings(out)
	return out, nil
}

// RecordedNoFsync are the client URLs of every server's no-fsync
// member, as the durable etcd records them.
func RecordedNoFsync(ctx context.Context, durable *clientv3.Client) ([]string, error) {
	return noFsyncMembers(ctx, durable, "")
}

// recordNoFsync records where m serves (the next generation's
// transaction forgot the members of the one before).
func recordNoFsync(ctx context.Context, durable *clientv3.Client, m Member) error {
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := durable.Put(pctx, noFsyncMemberKey(m.Name), m.AdvertisedClientURL()); err != nil {
		return fmt.Errorf("recording %s in the durable etcd: %w", m.label(), err)
	}
	return nil
}

// ForgetNoFsync deletes the record of a removed server's no-fsync member.
func ForgetNoFsync(ctx context.Context, durable *clientv3.Client, name string) error {
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := durable.Delete(pctx, noFsyncMemberKey(name))
	return err
}
