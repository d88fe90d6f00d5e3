package readiness

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/poll"
)

// ProbeKeyPrefix is where the write probes write, in each store: outside
// kube-apiserver's /registry, beside k1m's other keys (/k1m/cluster-ca).
const ProbeKeyPrefix = "/k1m/probe/"

// APIServerProbe passes when kube-apiserver answers /readyz with 200 at
// client: the server's own, over loopback, with the credentials its
// controllers use, so that it also says they can reach it.
func APIServerProbe(client rest.Interface) Probe {
	return Probe{Name: "kube-apiserver", Check: func(ctx context.Context) error { return poll.APIServerReady(ctx, client) }}
}

// WriteProbe passes when store commits a write of ProbeKeyPrefix+server
// (the time, so that each write changes the key): proof that the store
// has a quorum, which a read or etcd's own health would not give through
// a member cut off from it. One key per server, rewritten every interval:
// the store holds as many probe keys as servers, and its history grows by
// one revision per server per interval (compacted with the rest).
func WriteProbe(name string, store *clientv3.Client, server string) Probe {
	key := ProbeKeyPrefix + server
	return Probe{Name: name, Check: func(ctx context.Context) error {
		if _, err := store.Put(ctx, key, strconv.FormatInt(time.Now().Unix(), 10)); err != nil {
			return fmt.Errorf("writing %s: %w", key, err)
		}
		return nil
	}}
}

// QuorumProbe passes when store answers a linearizable read, which needs
// its leader and a majority: for a store whose full quota should not make
// a server unready (it refuses writes on every server alike).
func QuorumProbe(name string, store *clientv3.Client) Probe {
	return Probe{Name: name, Check: func(ctx context.Context) error {
		if _, err := store.Get(ctx, ProbeKeyPrefix+"quorum"); err != nil {
			return fmt.Errorf("reading %squorum: %w", ProbeKeyPrefix, err)
		}
		return nil
	}}
}
