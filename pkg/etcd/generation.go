package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A generation is one life of the no-fsync group: it begins when a server
// starts the group's first member (empty) and ends when a server starts
// the next one, which it may do only when the group can take no writes.
// The durable etcd, which has a quorum, records the current generation;
// a server whose member is in an older one leaves it and joins the
// current one (docs/ha.md has the states). Two live groups would each
// hold Leases the other does not, so that nodes renewing through one
// server look dead to the controller-manager reading another.
func noFsyncGenerationKey() string { return NoFsyncPrefix + "generation" }

// Generation is the durable etcd's record of the current no-fsync group.
type Generation struct {
	Number int64 `json:"generation"`
	// Revision is the revision the group's store started at: above any
	// revision an earlier group reached, so that a kube-apiserver watching
	// at an earlier group's revision is told it is compacted, and lists
	// again, instead of waiting silently for the new store to get there.
	Revision  int64     `json:"revision"`
	StartedBy string    `json:"startedBy"`
	StartedAt time.Time `json:"startedAt"`
	// modRevision is the record's revision in the durable etcd (0: none),
	// which the next generation's compare-and-swap names.
	modRevision int64
}

func (g Generation) String() string {
	if g.Number == 0 {
		return "generation 0 (none recorded)"
	}
	return fmt.Sprintf("generation %d (started by %s at %s)", g.Number, g.StartedBy, g.StartedAt.UTC().Format(time.RFC3339))
}

// ReadGeneration reads the current no-fsync generation from the durable
// etcd (a linearizable read: a server cut off from the durable quorum
// gets an error, not an old answer). None recorded (a cluster of an
// earlier release) is generation 0.
func ReadGeneration(ctx context.Context, durable *clientv3.Client) (Generation, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Get(gctx, noFsyncGenerationKey())
	if err != nil {
		return Generation{}, fmt.Errorf("reading the no-fsync generation (durable etcd %s): %w", noFsyncGenerationKey(), err)
	}
	if len(resp.Kvs) == 0 {
		return Generation{}, nil
	}
	var g Generation
	if err := json.Unmarshal(resp.Kvs[0].Value, &g); err != nil {
		return Generation{}, fmt.Errorf("the no-fsync generation in the durable etcd (%s) is not k1m's record: %w", noFsyncGenerationKey(), err)
	}
	g.modRevision = resp.Kvs[0].ModRevision
	return g, nil
}

// ErrGenerationMoved says another server recorded a generation first.
var ErrGenerationMoved = errors.New("another server started a newer no-fsync generation first")

// nextGeneration records the generation after prev, started by name, in
// one transaction that also forgets prev's members; it fails with
// ErrGenerationMoved when prev is no longer the record.
func nextGeneration(ctx context.Context, durable *clientv3.Client, prev Generation, name string, now time.Time) (Generation, error) {
	next := Generation{Number: prev.Number + 1, Revision: startRevision(prev, now), StartedBy: name, StartedAt: now.UTC()}
	data, err := json.Marshal(next)
	if err != nil {
		return Generation{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Txn(pctx).
		If(clientv3.Compare(clientv3.ModRevision(noFsyncGenerationKey()), "=", prev.modRevision)).
		Then(clientv3.OpDelete(NoFsyncPrefix+"members/", clientv3.WithPrefix()), clientv3.OpPut(noFsyncGenerationKey(), string(data))).
		Commit()
	if err != nil {
		return Generation{}, fmt.Errorf("recording no-fsync generation %d in the durable etcd: %w", next.Number, err)
	}
	if !resp.Succeeded {
		return Generation{}, ErrGenerationMoved
	}
	next.modRevision = resp.Header.Revision
	return next, nil
}

// minRevisionStep is how far above the previous group's start a new group
// starts at least, should this server's clock be behind.
const minRevisionStep = 1_000_000_000

// startRevision is where the next group's store starts: the time in
// microseconds. A store takes far fewer than a million writes a second
// (one etcd does about 50,000), so no group started earlier can have
// reached it; with clocks kept within seconds of each other (NTP), that
// holds across servers too. It is never below the previous start plus
// minRevisionStep.
func startRevision(prev Generation, now time.Time) int64 {
	return max(now.UnixMicro(), prev.Revision+minRevisionStep)
}

// startEmptyAt starts m, emptied, as the first member of a new cluster
// whose store begins at revision (marked compacted below it). etcd has no
// setting for a store's first revision; its snapshot restore can raise
// one, so an empty store is started, saved, and restored raised.
func startEmptyAt(ctx context.Context, m Member, clientTLS TLS, revision int64) (*Running, error) {
	if err := DiscardData(m.DataDir); err != nil {
		return nil, err
	}
	r, err := Start(ctx, m)
	if err != nil {
		return nil, err
	}
	empty := filepath.Join(filepath.Dir(m.DataDir), filepath.Base(m.DataDir)+".empty.db")
	sctx, cancel := context.WithTimeout(ctx, requestTimeout)
	err = saveSnapshot(sctx, r.Member.ClientURL(), clientTLS, empty)
	cancel()
	r.Stop()
	defer os.Remove(empty)
	if err != nil {
		return nil, fmt.Errorf("%s: saving its empty store: %w", m.label(), err)
	}
	if err := DiscardData(m.DataDir); err != nil {
		return nil, err
	}
	if err := restoreRaised(empty, m, m.DataDir, uint64(revision)); err != nil {
		return nil, fmt.Errorf("%s: %w", m.label(), err)
	}
	return Start(ctx, m)
}
