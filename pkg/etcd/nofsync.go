package etcd

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The no-fsync store of a multi-server cluster is a raft cluster too, so
// that Leases and Events survive the loss of a server. Its members start
// empty at every start (their files are not trusted after a stop), so a
// starting member always joins the others' cluster, or starts a new one
// when none answers. The durable etcd, which has a quorum, decides: it
// serialises servers starting at once and records where each no-fsync
// member is, under NoFsyncPrefix (outside kube-apiserver's /registry;
// the key keeps the name earlier releases wrote it under, so that servers
// of two releases find each other's records during a rolling upgrade).
const NoFsyncPrefix = "/k1m/ephemeral-etcd/"

func noFsyncMemberKey(name string) string { return NoFsyncPrefix + "members/" + name }

// noFsyncJoinTimeout bounds the attempt to join the other servers'
// no-fsync cluster before a new one is started.
const noFsyncJoinTimeout = 30 * time.Second

// StartNoFsync starts m, a server's no-fsync member, in the cluster of
// the other servers' no-fsync members when one of them takes it, else as
// a new cluster (every server stopped at once: Leases and Events start
// over, as a lone server's do). durable is a client of the durable etcd;
// clientTLS is the client certificate the no-fsync members accept.
func StartNoFsync(ctx context.Context, durable *clientv3.Client, m Member, clientTLS TLS, report func(string)) (*Running, error) {
	session, err := concurrency.NewSession(durable, concurrency.WithTTL(30), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s: a session with the durable etcd: %w", m.label(), err)
	}
	defer session.Close()
	lock := concurrency.NewMutex(session, NoFsyncPrefix+"lock")
	if err := lock.Lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: taking the start lock in the durable etcd: %w", m.label(), err)
	}
	defer lock.Unlock(context.Background())
	others, err := noFsyncMembers(ctx, durable, m.Name)
	if err != nil {
		return nil, err
	}
	if len(others) > 0 {
		r, err := joinNoFsync(ctx, others, m, clientTLS, report)
		if r != nil {
			if err := recordNoFsync(ctx, durable, m, false); err != nil {
				r.Stop()
				return nil, err
			}
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		report(fmt.Sprintf("%s: the other servers' members (%s) did not take it (%v): starting a new no-fsync cluster; Leases and Events start over", m.label(), strings.Join(others, ", "), err))
	}
	// A token of its own: a member of an earlier no-fsync cluster (a
	// server that kept running through a restore on another) is refused
	// by its cluster ID instead of taking this member into its group.
	if m.ClusterToken, err = randomID(); err != nil {
		return nil, err
	}
	m.ClusterToken = "k1m-nofsync-" + m.ClusterToken
	r, err := Start(ctx, m)
	if err != nil {
		return nil, err
	}
	if err := recordNoFsync(ctx, durable, m, true); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// joinNoFsync joins the members at seeds; a nil Running with an error
// means they did not take m and nothing was started.
func joinNoFsync(ctx context.Context, seeds []string, m Member, clientTLS TLS, report func(string)) (*Running, error) {
	jctx, cancel := context.WithTimeout(ctx, noFsyncJoinTimeout)
	defer cancel()
	joined, err := Join(jctx, seeds, clientTLS, m, report)
	if err != nil {
		return nil, err
	}
	r, err := Start(ctx, joined)
	if err != nil {
		return nil, err
	}
	if err := r.Promote(ctx, seeds, clientTLS, report); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
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

// recordNoFsync records where m serves; a new cluster forgets every
// other member first.
func recordNoFsync(ctx context.Context, durable *clientv3.Client, m Member, newCluster bool) error {
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if newCluster {
		if _, err := durable.Delete(pctx, NoFsyncPrefix+"members/", clientv3.WithPrefix()); err != nil {
			return fmt.Errorf("forgetting the old no-fsync members in the durable etcd: %w", err)
		}
	}
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
