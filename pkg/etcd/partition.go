package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The store's partitions (constants.StorePartitions) are raft groups of
// their own, one member on every server that runs etcd, their data kept
// like the durable etcd's. The durable etcd records which resources the
// cluster keeps apart (its layout, fixed when the cluster is made) and
// where every server's member of each partition serves, under
// PartitionPrefix, outside kube-apiserver's /registry.
const PartitionPrefix = "/k1m/partitions/"

func partitionLayoutKey() string { return PartitionPrefix + "layout" }

// partitionMembersPrefix holds every partition's member records, so that
// a restore forgets them with one delete.
const partitionMembersPrefix = PartitionPrefix + "members/"

func partitionMembersOf(partition string) string { return partitionMembersPrefix + partition + "/" }

// Layout is the cluster's partitions as the durable etcd records them.
type Layout struct {
	// Partitions are the partitioned resources' names, in
	// constants.StorePartitions' order; none: every resource but Events
	// and Leases in the durable etcd.
	Partitions []string `json:"partitions"`
}

// ReadLayout reads the recorded layout; recorded is false when the
// cluster has none (made before partitions existed, or not started yet).
func ReadLayout(ctx context.Context, durable *clientv3.Client) (layout Layout, recorded bool, err error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Get(gctx, partitionLayoutKey())
	if err != nil {
		return Layout{}, false, fmt.Errorf("reading the store's partitions (durable etcd %s): %w", partitionLayoutKey(), err)
	}
	if len(resp.Kvs) == 0 {
		return Layout{}, false, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &layout); err != nil {
		return Layout{}, false, fmt.Errorf("the store's partitions (durable etcd %s): %w", partitionLayoutKey(), err)
	}
	return layout, true, nil
}

// RecordLayout records layout unless one is recorded already, and
// returns the one recorded (its own, or the one that was there: two
// servers starting at once agree on the first).
func RecordLayout(ctx context.Context, durable *clientv3.Client, layout Layout) (Layout, error) {
	data, err := json.Marshal(layout)
	if err != nil {
		return Layout{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := partitionLayoutKey()
	resp, err := durable.Txn(pctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return Layout{}, fmt.Errorf("recording the store's partitions (durable etcd %s): %w", key, err)
	}
	if resp.Succeeded {
		return layout, nil
	}
	var there Layout
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return Layout{}, fmt.Errorf("the store's partitions (durable etcd %s): recorded and gone at once", key)
	}
	if err := json.Unmarshal(kvs[0].Value, &there); err != nil {
		return Layout{}, fmt.Errorf("the store's partitions (durable etcd %s): %w", key, err)
	}
	return there, nil
}

// HasRegistry tells whether kube-apiserver has written to the durable
// etcd: a cluster that has run.
func HasRegistry(ctx context.Context, durable *clientv3.Client) (bool, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := durable.Get(gctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("reading whether the durable etcd holds a cluster: %w", err)
	}
	return resp.Count > 0, nil
}

// RecordPartitionMember records where m, a server's member of partition,
// serves the other servers.
func RecordPartitionMember(ctx context.Context, durable *clientv3.Client, partition string, m Member) error {
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := durable.Put(pctx, partitionMembersOf(partition)+m.Name, m.AdvertisedClientURL()); err != nil {
		return fmt.Errorf("recording %s in the durable etcd: %w", m.label(), err)
	}
	return nil
}

// PartitionMembers are the recorded client URLs of the partition's
// members, but self's ("": every one).
func PartitionMembers(ctx context.Context, durable *clientv3.Client, partition, self string) ([]string, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	prefix := partitionMembersOf(partition)
	resp, err := durable.Get(gctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading where the %s partition's members are (durable etcd %s): %w", partition, prefix, err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		if string(kv.Key) != prefix+self || self == "" {
			out = append(out, string(kv.Value))
		}
	}
	sort.Strings(out)
	return out, nil
}

// ForgetPartitionMember deletes the record of a removed server's member
// of partition.
func ForgetPartitionMember(ctx context.Context, durable *clientv3.Client, partition, name string) error {
	pctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := durable.Delete(pctx, partitionMembersOf(partition)+name)
	return err
}

// ForgetPartitionMembers deletes every recorded member of every
// partition: after a restore or reset they are the old incarnation's.
func ForgetPartitionMembers(ctx context.Context, durable *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := durable.Delete(ctx, partitionMembersPrefix, clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("forgetting the partitions' members in the durable etcd: %w", err)
	}
	return nil
}

// PartitionToken is the cluster token of a partition's new raft group: a
// group of its own ID, so that a member of another cluster's group (or
// of this partition before a restore) is refused instead of joined.
func PartitionToken(partition string) (string, error) {
	id, err := randomID()
	if err != nil {
		return "", err
	}
	return "k1m-" + partition + "-" + id, nil
}
