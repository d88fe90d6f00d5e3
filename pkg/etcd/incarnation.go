package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A cluster's durable data lives one incarnation after another: one is
// made with the cluster, and each restore from a snapshot or
// --cluster-reset makes the next. The durable etcd records the current one
// under IncarnationKey (outside kube-apiserver's /registry), and every
// server keeps the one its data belongs to: a server whose data is of an
// incarnation the cluster has replaced holds the cluster as it was
// before the restore, and must not rejoin with it.
//
// etcd fences its own raft: a restored member starts a new raft cluster
// whose ID is made from Member.ClusterToken (the restore gives each
// incarnation its own), so old members' messages are refused ("cluster ID
// mismatch"), and a --cluster-reset removes the other members, which etcd
// refuses from then on. The incarnation gives that fence words: a stale
// server is refused before its etcd starts, naming both incarnations.
//
// Cost: one read or transaction on the durable etcd per server start, and
// one serializable read of each other server's etcd; nothing per node.
const IncarnationKey = "/k1m/incarnation"

// Incarnation is one life of a cluster's durable data.
type Incarnation struct {
	ID string `json:"id"`
	// Replaces is the incarnation a restore or reset ended ("" for a new
	// cluster, or one from a build before incarnations).
	Replaces string    `json:"replaces,omitempty"`
	How      string    `json:"how"` // what made it: "created", "restored from FILE", "membership reset"
	At       time.Time `json:"at"`
}

// NewIncarnation makes an incarnation with a random ID.
func NewIncarnation(replaces, how string, at time.Time) (Incarnation, error) {
	id, err := randomID()
	return Incarnation{ID: id, Replaces: replaces, How: how, At: at.UTC()}, err
}

// randomID is 64 random bits in hex.
func randomID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// String names the incarnation in messages.
func (i Incarnation) String() string {
	return fmt.Sprintf("%s (%s at %s)", i.ID, i.How, i.At.Format(time.RFC3339))
}

// ClusterToken is etcd's --initial-cluster-token of a raft cluster this
// incarnation starts: its own, so that its cluster ID is new.
func (i Incarnation) ClusterToken() string { return "k1m-" + i.ID }

// EnsureIncarnation records fresh under IncarnationKey when the durable
// etcd has none (a new cluster, or one from a build before incarnations)
// and returns the one recorded.
func EnsureIncarnation(ctx context.Context, cli *clientv3.Client, fresh Incarnation) (Incarnation, error) {
	data, err := json.Marshal(fresh)
	if err != nil {
		return Incarnation{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(IncarnationKey), "=", 0)).
		Then(clientv3.OpPut(IncarnationKey, string(data))).
		Else(clientv3.OpGet(IncarnationKey)).
		Commit()
	if err != nil {
		return Incarnation{}, fmt.Errorf("reading %s: %w", IncarnationKey, err)
	}
	if resp.Succeeded {
		return fresh, nil
	}
	return parseIncarnation(resp.Responses[0].GetResponseRange().Kvs)
}

// SetIncarnation records inc as the current incarnation: a restore's or
// reset's.
func SetIncarnation(ctx context.Context, cli *clientv3.Client, inc Incarnation) error {
	data, err := json.Marshal(inc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := cli.Put(ctx, IncarnationKey, string(data)); err != nil {
		return fmt.Errorf("recording %s: %w", IncarnationKey, err)
	}
	return nil
}

// ErrNoIncarnation says a member records no incarnation.
var ErrNoIncarnation = errors.New("no incarnation recorded")

// ReadIncarnation reads the incarnation the member at endpoint holds,
// from its own copy (a serializable read: a member that lost its quorum
// answers too), within timeout.
func ReadIncarnation(ctx context.Context, endpoint string, tls TLS, timeout time.Duration) (Incarnation, error) {
	cli, err := NewClient([]string{endpoint}, tls)
	if err != nil {
		return Incarnation{}, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Get(ctx, IncarnationKey, clientv3.WithSerializable())
	if err != nil {
		return Incarnation{}, err
	}
	return parseIncarnation(resp.Kvs)
}

func parseIncarnation(kvs []*mvccpb.KeyValue) (Incarnation, error) {
	if len(kvs) != 1 {
		return Incarnation{}, ErrNoIncarnation
	}
	var inc Incarnation
	if err := json.Unmarshal(kvs[0].Value, &inc); err != nil || inc.ID == "" {
		return Incarnation{}, fmt.Errorf("%s holds %q, not an incarnation: %v", IncarnationKey, kvs[0].Value, err)
	}
	return inc, nil
}

// Fence is how this server's incarnation stands to another server's.
type Fence int

const (
	// Same: both are of one incarnation.
	Same Fence = iota
	// PeerReplaced: the other still runs the incarnation this one's
	// restore or reset replaced: it must stop (and rejoin with empty
	// data) before this one starts.
	PeerReplaced
	// Stale: the other runs an incarnation this one's data is not of
	// (the cluster was restored or reset since, or it is another
	// cluster): this one must rejoin with empty data.
	Stale
)

// FenceAgainst tells how mine stands to theirs, another server's.
func (mine Incarnation) FenceAgainst(theirs Incarnation) Fence {
	switch {
	case theirs.ID == mine.ID:
		return Same
	case mine.Replaces != "" && theirs.ID == mine.Replaces:
		return PeerReplaced
	}
	return Stale
}

// ForgetNoFsyncMembers deletes every recorded no-fsync member: after a
// restore or reset they are the old incarnation's, which the restored
// server must not join.
func ForgetNoFsyncMembers(ctx context.Context, durable *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := durable.Delete(ctx, NoFsyncPrefix+"members/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("forgetting the no-fsync members in the durable etcd: %w", err)
	}
	return nil
}
