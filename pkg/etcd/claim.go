package etcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ClusterKey holds, in an external etcd a cluster keeps a store in, the
// hash of the cluster CA that claimed it: two clusters writing one store
// would mix their objects.
const ClusterKey = "/k1m/cluster-ca"

// ErrClaimed says another cluster's data is in the store.
var ErrClaimed = errors.New("the etcd holds another cluster's data")

// Claim records owner under ClusterKey when no cluster is recorded, and
// succeeds when owner is; another recorded owner is ErrClaimed.
func Claim(ctx context.Context, cli *clientv3.Client, owner string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ClusterKey), "=", 0)).
		Then(clientv3.OpPut(ClusterKey, owner)).
		Else(clientv3.OpGet(ClusterKey)).
		Commit()
	if err != nil {
		return fmt.Errorf("reading %s: %w", ClusterKey, err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 1 && string(kvs[0].Value) == owner {
		return nil
	}
	recorded := ""
	if len(kvs) == 1 {
		recorded = string(kvs[0].Value)
	}
	return fmt.Errorf("%w (its %s is %s, this cluster's %s)", ErrClaimed, ClusterKey, recorded, owner)
}
