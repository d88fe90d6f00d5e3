// Package storebytes measures what a cluster's objects cost its etcd
// stores, read from etcd itself: per kind, how many objects, their key
// and value bytes as kube-apiserver wrote them and the value bytes
// without managedFields; per store, the revisions written a second at
// idle and the database file before and after compaction and
// defragmentation. A sizing model then scales the per-node and per-pod
// bytes to a cluster of any size.
package storebytes

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Class says what an object's number grows with.
type Class string

const (
	// PerNode objects are named after a node: its Node, CSINode, node
	// Lease, and k1m's route and policy ConfigMaps.
	PerNode Class = "node"
	// PerPod objects are in the workload's namespace: its pods and their
	// share of the Deployments, ReplicaSets, Services, Endpoints,
	// EndpointSlices and Events.
	PerPod Class = "workload"
	// Other objects are the cluster's own (its system pods, RBAC, CRDs,
	// ...) and whatever names neither a node nor the workload.
	Other Class = "other"
)

// Classifier places a key in its class.
type Classifier struct {
	Nodes     map[string]bool // node names
	Namespace string          // the workload's namespace
}

// Class of the object stored at key.
func (c Classifier) Class(key string) Class {
	segs := Segments(key)
	if len(segs) == 0 {
		return Other
	}
	if c.Nodes[segs[len(segs)-1]] {
		return PerNode
	}
	for _, s := range segs[1 : len(segs)-1] {
		if s == c.Namespace {
			return PerPod
		}
	}
	return Other
}

// Kind is the objects of one kind and class in one store.
type Kind struct {
	Store, Kind string
	Class       Class
	Count       int
	// KeyBytes and ValueBytes add up the keys and values as stored;
	// NoManagedFieldsBytes the values without metadata.managedFields.
	KeyBytes, ValueBytes, NoManagedFieldsBytes int64
	MaxValueBytes                              int
}

// Bytes is what the kind's objects hold: keys and values.
func (k Kind) Bytes() int64 { return k.KeyBytes + k.ValueBytes }

// pageSize is how many keys one range request reads.
const pageSize = 500

// ReadKinds reads every key under /registry/ of a store at one revision,
// page by page, and adds them up by kind and class.
func ReadKinds(ctx context.Context, cli *clientv3.Client, store string, c Classifier) ([]Kind, int64, error) {
	const prefix = "/registry/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	byKey := map[[2]string]*Kind{}
	key, rev := prefix, int64(0)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, key, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the %s store's keys from %q: %w", store, key, err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			v, err := Decode(kv.Value)
			if err != nil {
				return nil, 0, fmt.Errorf("the %s store's key %s: %w", store, kv.Key, err)
			}
			class := c.Class(string(kv.Key))
			k := byKey[[2]string{v.Kind, string(class)}]
			if k == nil {
				k = &Kind{Store: store, Kind: v.Kind, Class: class}
				byKey[[2]string{v.Kind, string(class)}] = k
			}
			k.add(len(kv.Key), len(kv.Value), v.WithoutManagedFields)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return sortedKinds(byKey), rev, nil
}

func (k *Kind) add(key, value, noManagedFields int) {
	k.Count++
	k.KeyBytes += int64(key)
	k.ValueBytes += int64(value)
	k.NoManagedFieldsBytes += int64(noManagedFields)
	k.MaxValueBytes = max(k.MaxValueBytes, value)
}

// sortedKinds orders kinds by class, then by bytes, largest first.
func sortedKinds(byKey map[[2]string]*Kind) []Kind {
	var out []Kind
	for _, k := range byKey {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Class != out[j].Class {
			return out[i].Class < out[j].Class
		}
		if out[i].Bytes() != out[j].Bytes() {
			return out[i].Bytes() > out[j].Bytes()
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// File is a store's database file, as its member reports it.
type File struct {
	Size, InUse int64 // bytes: the file, and its pages in use
	Revision    int64
}

// Status reads the database file of the store's member at endpoint.
func Status(ctx context.Context, cli *clientv3.Client, endpoint string) (File, error) {
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return File{}, fmt.Errorf("etcd status of %s: %w", endpoint, err)
	}
	return File{Size: st.DbSize, InUse: st.DbSizeInUse, Revision: st.Header.Revision}, nil
}

// CompactAndDefragment drops every revision before the newest, as
// kube-apiserver's compactor does every 5 minutes, then rewrites the
// member's file without its free pages, and reads the file again.
func CompactAndDefragment(ctx context.Context, cli *clientv3.Client, endpoint string) (File, error) {
	before, err := Status(ctx, cli, endpoint)
	if err != nil {
		return File{}, err
	}
	if _, err := cli.Compact(ctx, before.Revision, clientv3.WithCompactPhysical()); err != nil {
		return File{}, fmt.Errorf("compacting %s at revision %d: %w", endpoint, before.Revision, err)
	}
	if _, err := cli.Defragment(ctx, endpoint); err != nil {
		return File{}, fmt.Errorf("defragmenting %s: %w", endpoint, err)
	}
	return Status(ctx, cli, endpoint)
}

// Writes counts what a store writes from a revision on, by kind and
// class: the revisions kube-apiserver's compactor keeps until its next
// run.
type Writes struct {
	store  string
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   int64   // the newest revision the watch has reported
	writes []write // in revision order
	err    error
}

type write struct {
	revision int64
	kind     string
	class    Class
	key      int
	value    int
	noMF     int
}

// deletedKind counts deletions: a deletion's event carries no value.
const deletedKind = "(deleted)"

// stopWait bounds how long Stop waits for the watch to catch up.
const stopWait = 30 * time.Second

// WatchWrites starts counting every write under /registry/ after
// revision from; Stop ends it at a revision.
func WatchWrites(ctx context.Context, cli *clientv3.Client, store string, c Classifier, from int64) *Writes {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	w := &Writes{store: store, cancel: cancel, done: make(chan struct{}), seen: from}
	go func() {
		defer close(w.done)
		for resp := range cli.Watch(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(from+1), clientv3.WithProgressNotify()) {
			if err := w.take(c, resp); err != nil {
				if ctx.Err() == nil {
					w.fail(err)
				}
				return
			}
		}
	}()
	return w
}

func (w *Writes) take(c Classifier, resp clientv3.WatchResponse) error {
	if err := resp.Err(); err != nil {
		return fmt.Errorf("watching the %s store's writes: %w", w.store, err)
	}
	var got []write
	for _, ev := range resp.Events {
		wr := write{revision: ev.Kv.ModRevision, kind: deletedKind, class: c.Class(string(ev.Kv.Key)), key: len(ev.Kv.Key), value: len(ev.Kv.Value)}
		if ev.Type != clientv3.EventTypeDelete {
			v, err := Decode(ev.Kv.Value)
			if err != nil {
				return fmt.Errorf("the %s store's write of %s: %w", w.store, ev.Kv.Key, err)
			}
			wr.kind, wr.noMF = v.Kind, v.WithoutManagedFields
		}
		got = append(got, wr)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, got...)
	w.seen = max(w.seen, resp.Header.Revision)
	return nil
}

func (w *Writes) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

// Stop waits until the watch has reported revision until, ends it, and
// returns the writes up to that revision by kind and class.
func (w *Writes) Stop(until int64) ([]Kind, error) {
	defer func() { w.cancel(); <-w.done }()
	deadline := time.Now().Add(stopWait)
	for {
		w.mu.Lock()
		seen, err := w.seen, w.err
		w.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if seen >= until {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the %s store's watch reported revision %d, not %d, within %v", w.store, seen, until, stopWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	byKey := map[[2]string]*Kind{}
	for _, wr := range w.writes {
		if wr.revision > until {
			break
		}
		k := byKey[[2]string{wr.kind, string(wr.class)}]
		if k == nil {
			k = &Kind{Store: w.store, Kind: wr.kind, Class: wr.class}
			byKey[[2]string{wr.kind, string(wr.class)}] = k
		}
		k.add(wr.key, wr.value, wr.noMF)
	}
	return sortedKinds(byKey), nil
}
