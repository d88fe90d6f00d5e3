package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A migration moves resources of a running cluster out of the durable
// etcd into partitions of their own (k1m etcd-partitions migrate). While
// it is recorded, the resources' writes are refused cluster-wide; the
// first server restarted with the new --etcd-partitions seeds each new
// partition from its durable member, the others join it, and once every
// API server runs the new layout the migration records it and the old
// keys go.

func partitionMigrationKey() string { return PartitionPrefix + "migration" }

// partitionSeedPrefix holds, per new partition, the server that seeds it.
const partitionSeedPrefix = PartitionPrefix + "seed/"

// partitionServersPrefix holds, per server, the layout its kube-apiserver
// was started with.
const partitionServersPrefix = PartitionPrefix + "servers/"

// Migration is a move of resources into partitions, as recorded.
type Migration struct {
	// From is the layout when the move began; To the one it ends with.
	From []string `json:"from"`
	To   []string `json:"to"`
}

// Moved are the partitions To adds to From.
func (m Migration) Moved() []string {
	var out []string
	for _, p := range m.To {
		if !slices.Contains(m.From, p) {
			out = append(out, p)
		}
	}
	return out
}

// ErrMigrationMoved is returned when the layout or the migration record
// changed under a step: another command or server went first.
var ErrMigrationMoved = errors.New("the store's partitions changed meanwhile (another k1m etcd-partitions migrate?)")

// ReadMigration reads the migration under way; ok is false when none is.
func ReadMigration(ctx context.Context, durable *clientv3.Client) (mig Migration, ok bool, err error) {
	mig, rev, err := readMigration(ctx, durable)
	return mig, rev != 0, err
}

func readMigration(ctx context.Context, durable *clientv3.Client) (Migration, int64, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Get(gctx, partitionMigrationKey())
	if err != nil {
		return Migration{}, 0, fmt.Errorf("reading the partitions' migration (durable etcd %s): %w", partitionMigrationKey(), err)
	}
	if len(resp.Kvs) == 0 {
		return Migration{}, 0, nil
	}
	var mig Migration
	if err := json.Unmarshal(resp.Kvs[0].Value, &mig); err != nil {
		return Migration{}, 0, fmt.Errorf("the partitions' migration (durable etcd %s): %w", partitionMigrationKey(), err)
	}
	return mig, resp.Kvs[0].ModRevision, nil
}

// StartMigration records mig, if the recorded layout is still mig.From
// and no migration is under way.
func StartMigration(ctx context.Context, durable *clientv3.Client, mig Migration) error {
	// No layout recorded: a cluster made before partitions, which has none.
	if _, err := RecordLayout(ctx, durable, Layout{Partitions: []string{}}); err != nil {
		return err
	}
	// Revisions first: a layout changed after them fails the transaction.
	seen, err := ReadLayoutRevisions(ctx, durable)
	if err != nil {
		return err
	}
	layout, _, err := ReadLayout(ctx, durable)
	if err != nil {
		return err
	}
	if !slices.Equal(layout.Partitions, mig.From) {
		return ErrMigrationMoved
	}
	data, err := json.Marshal(mig)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := partitionMigrationKey()
	txn, err := durable.Txn(pctx).If(
		clientv3.Compare(clientv3.ModRevision(partitionLayoutKey()), "=", seen.Layout),
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
	).Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return fmt.Errorf("recording the partitions' migration (durable etcd %s): %w", key, err)
	}
	if !txn.Succeeded {
		return ErrMigrationMoved
	}
	return nil
}

// FinishMigration records mig.To as the layout, forgets the migration and
// its seed claims, and deletes the moved resources' keys (prefixes) from
// the durable etcd, in one transaction: done only if mig is still the
// migration recorded.
func FinishMigration(ctx context.Context, durable *clientv3.Client, mig Migration, prefixes []string) error {
	current, rev, err := readMigration(ctx, durable)
	if err != nil {
		return err
	}
	if rev == 0 || !slices.Equal(current.To, mig.To) {
		return ErrMigrationMoved
	}
	data, err := json.Marshal(Layout{Partitions: mig.To})
	if err != nil {
		return err
	}
	ops := []clientv3.Op{
		clientv3.OpPut(partitionLayoutKey(), string(data)),
		clientv3.OpDelete(partitionMigrationKey()),
		clientv3.OpDelete(partitionSeedPrefix, clientv3.WithPrefix()),
	}
	for _, p := range prefixes {
		ops = append(ops, clientv3.OpDelete(p, clientv3.WithPrefix()))
	}
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Txn(pctx).If(clientv3.Compare(clientv3.ModRevision(partitionMigrationKey()), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("recording the partitions %s (durable etcd %s): %w", strings.Join(mig.To, ","), partitionLayoutKey(), err)
	}
	if !resp.Succeeded {
		return ErrMigrationMoved
	}
	return nil
}

// ClaimSeed makes server the seeder of partition unless another server is
// already, and returns the seeder.
func ClaimSeed(ctx context.Context, durable *clientv3.Client, partition, server string) (string, error) {
	key := partitionSeedPrefix + partition
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Txn(pctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, server)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return "", fmt.Errorf("claiming the seeding of the %s partition (durable etcd %s): %w", partition, key, err)
	}
	if resp.Succeeded {
		return server, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", fmt.Errorf("the seeding of the %s partition (durable etcd %s): claimed and gone at once", partition, key)
	}
	return string(kvs[0].Value), nil
}

// ReleaseSeed forgets server's claim to seed partition (a removed server:
// another seeds it then).
func ReleaseSeed(ctx context.Context, durable *clientv3.Client, partition, server string) error {
	key := partitionSeedPrefix + partition
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := durable.Txn(pctx).If(clientv3.Compare(clientv3.Value(key), "=", server)).Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return fmt.Errorf("forgetting server %s's claim to seed the %s partition (durable etcd %s): %w", server, partition, key, err)
	}
	return nil
}

// ServerLayout is what a server records of its kube-apiserver: the
// partitions it was started with and the address it advertises.
type ServerLayout struct {
	Partitions []string `json:"partitions"`
	Address    string   `json:"address"`
}

// LayoutRevisions are the revisions at which the layout and the migration
// records last changed (0: none recorded), as a server saw them when it
// checked its --etcd-partitions.
type LayoutRevisions struct{ Layout, Migration int64 }

// ReadLayoutRevisions reads both in one transaction.
func ReadLayoutRevisions(ctx context.Context, durable *clientv3.Client) (LayoutRevisions, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Txn(gctx).Then(clientv3.OpGet(partitionLayoutKey()), clientv3.OpGet(partitionMigrationKey())).Commit()
	if err != nil {
		return LayoutRevisions{}, fmt.Errorf("reading the store's partitions (durable etcd %s): %w", PartitionPrefix, err)
	}
	var revs [2]int64
	for i, r := range resp.Responses {
		if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
			revs[i] = kvs[0].ModRevision
		}
	}
	return LayoutRevisions{Layout: revs[0], Migration: revs[1]}, nil
}

// RecordServerLayout records server's ServerLayout if the layout and the
// migration records are as seen: a server whose check a migration (or its
// end) overtook would otherwise report a layout it was not checked for.
func RecordServerLayout(ctx context.Context, durable *clientv3.Client, server string, l ServerLayout, seen LayoutRevisions) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Txn(pctx).If(
		clientv3.Compare(clientv3.ModRevision(partitionLayoutKey()), "=", seen.Layout),
		clientv3.Compare(clientv3.ModRevision(partitionMigrationKey()), "=", seen.Migration),
	).Then(clientv3.OpPut(partitionServersPrefix+server, string(data))).Commit()
	if err != nil {
		return fmt.Errorf("recording server %s's partitions in the durable etcd: %w", server, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w while server %s started: start it again", ErrMigrationMoved, server)
	}
	return nil
}

// ServerLayouts are the recorded ServerLayouts by server name.
func ServerLayouts(ctx context.Context, durable *clientv3.Client) (map[string]ServerLayout, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Get(gctx, partitionServersPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading the servers' partitions (durable etcd %s): %w", partitionServersPrefix, err)
	}
	out := map[string]ServerLayout{}
	for _, kv := range resp.Kvs {
		var l ServerLayout
		if err := json.Unmarshal(kv.Value, &l); err != nil {
			return nil, fmt.Errorf("durable etcd %s: %w", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), partitionServersPrefix)] = l
	}
	return out, nil
}

// ForgetServerLayout deletes a removed server's ServerLayout.
func ForgetServerLayout(ctx context.Context, durable *clientv3.Client, server string) error {
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := durable.Delete(pctx, partitionServersPrefix+server)
	return err
}

// SeedPartition makes m's data, the only member of a new partition group,
// from the durable etcd at durableURL: a snapshot of it restored with its
// revision raised by bump (marked compacted below it), every key outside
// keep deleted, then compacted and defragmented. The keys under keep
// keep their revisions, so objects keep their resourceVersions; the
// store's raised revision puts every later one above what the durable
// etcd gave. It works in a directory beside m.DataDir and moves it into
// place only when done: a seed cut short leaves nothing to start from.
func SeedPartition(ctx context.Context, durableURL string, clientTLS TLS, m Member, keep string, bump uint64, report func(string)) error {
	if err := caughtUp(ctx, durableURL, clientTLS); err != nil {
		return err
	}
	snap := m.DataDir + ".seed.db"
	staging := m.DataDir + ".seed"
	defer os.Remove(snap)
	defer os.RemoveAll(staging)
	if err := os.RemoveAll(staging); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(m.DataDir), 0o700); err != nil {
		return err
	}
	report(fmt.Sprintf("%s: copying the durable etcd (snapshot of %s)", m.label(), durableURL))
	if err := saveSnapshot(ctx, durableURL, clientTLS, snap); err != nil {
		return err
	}
	if err := restoreRaised(snap, m, staging, bump); err != nil {
		return fmt.Errorf("%s: %w", m.label(), err)
	}
	os.Remove(snap)
	staged := m
	staged.DataDir = staging
	r, err := Start(ctx, staged)
	if err != nil {
		return err
	}
	err = keepOnly(ctx, r, clientTLS, keep)
	r.Stop()
	if err != nil {
		return fmt.Errorf("%s: %w", m.label(), err)
	}
	report(fmt.Sprintf("%s: seeded with the keys under %s", m.label(), keep))
	if err := DiscardData(m.DataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return err
	}
	return os.Rename(filepath.Join(staging, "member"), filepath.Join(m.DataDir, "member"))
}

// caughtUp makes the member at url apply everything committed before now
// (a linearizable read waits for it): acknowledged writes are in the
// snapshot taken next.
func caughtUp(ctx context.Context, url string, clientTLS TLS) error {
	cli, err := newClient(ctx, []string{url}, clientTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := cli.Get(gctx, partitionLayoutKey()); err != nil {
		return fmt.Errorf("a quorum read of the durable etcd at %s: %w", url, err)
	}
	return nil
}

// keepOnly deletes every key of the running member r outside prefix, then
// compacts and defragments it, so that members joining later are sent
// the partition's data only.
func keepOnly(ctx context.Context, r *Running, clientTLS TLS, prefix string) error {
	cli, err := newClient(ctx, []string{r.Member.ClientURL()}, clientTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	end := clientv3.GetPrefixRangeEnd(prefix)
	resp, err := cli.Txn(dctx).Then(
		clientv3.OpDelete("\x00", clientv3.WithRange(prefix)),
		clientv3.OpDelete(end, clientv3.WithFromKey()),
	).Commit()
	if err != nil {
		return fmt.Errorf("deleting the keys outside %s: %w", prefix, err)
	}
	if _, err := cli.Compact(dctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("compacting: %w", err)
	}
	if err := r.etcd.Server.Backend().Defrag(); err != nil {
		return fmt.Errorf("defragmenting: %w", err)
	}
	return nil
}
