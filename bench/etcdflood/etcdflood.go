// Package etcdflood writes Lease-sized values straight to etcd, closed
// loop from many clients, to compare a durable member (fsync on every
// commit) with one started with --unsafe-no-fsync. The values are real
// Leases encoded as kube-apiserver stores them (protobuf with the k8s
// envelope), under the keys it uses.
package etcdflood

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/clock"
)

// Config of one flood.
type Config struct {
	Keys     int // distinct Lease keys
	Clients  int // etcd client connections
	Workers  int // concurrent writers, spread over the clients
	Warmup   time.Duration
	Duration time.Duration
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	switch {
	case c.Keys < 1:
		return fmt.Errorf("--etcd-keys %d: want at least 1, e.g. 10000", c.Keys)
	case c.Clients < 1 || c.Workers < c.Clients:
		return fmt.Errorf("--etcd-clients %d / --etcd-workers %d: want at least one client and no more clients than workers, e.g. 8 and 256", c.Clients, c.Workers)
	case c.Duration <= 0 || c.Warmup < 0:
		return fmt.Errorf("--duration %v / --warmup %v: want a positive duration and a warm-up >= 0", c.Duration, c.Warmup)
	}
	return nil
}

// Result of one flood.
type Result struct {
	Puts, Errors int64
	Elapsed      time.Duration
	Rate         float64
	ValueBytes   int
	Latency      stats.Latency
	Etcd         proc.Usage
}

// TLS of the etcd clients.
type TLS struct{ CA, Cert, Key string }

// LeaseValue is a node Lease as kube-apiserver writes it to etcd.
func LeaseValue(name string) ([]byte, error) {
	now := metav1.NewMicroTime(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	lease := &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease", UID: "6f1c2a4e-0d55-4c2f-9a7e-1b2c3d4e5f60",
			ResourceVersion: "", CreationTimestamp: metav1.NewTime(now.Time),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: "0e5d7c1a-3b2f-4e6d-8c9b-a1b2c3d4e5f6"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "coordination.k8s.io/v1", Time: ptr.To(metav1.NewTime(now.Time)), FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"0e5d7c1a-3b2f-4e6d-8c9b-a1b2c3d4e5f6\"}":{}}},"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{},"f:renewTime":{}}}`)}}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
	}
	return runtime.Encode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), lease)
}

// Run floods the member at url and attributes the CPU of member to the puts.
func Run(ctx context.Context, url string, tls TLS, member *proc.Process, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	tlsConfig, err := transport.TLSInfo{TrustedCAFile: tls.CA, CertFile: tls.Cert, KeyFile: tls.Key}.ClientConfig()
	if err != nil {
		return Result{}, err
	}
	clients := make([]*clientv3.Client, cfg.Clients)
	for i := range clients {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: tlsConfig, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		clients[i] = c
	}
	value, err := LeaseValue("node-0000000")
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var measuring atomic.Bool
	lats := make([][]time.Duration, cfg.Workers)
	errCounts := make([]int64, cfg.Workers)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kv := clients[w%len(clients)]
			for i := w; ctx.Err() == nil; i += cfg.Workers {
				key := fmt.Sprintf("/registry/leases/kube-node-lease/node-%07d", i%cfg.Keys)
				start := time.Now()
				_, err := kv.Put(ctx, key, string(value))
				took := time.Since(start)
				if !measuring.Load() || ctx.Err() != nil {
					continue
				}
				if err != nil {
					errCounts[w]++
					continue
				}
				lats[w] = append(lats[w], took)
			}
		}()
	}
	clock.Sleep(ctx, cfg.Warmup)
	before, err := member.Usage()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	measuring.Store(true)
	clock.Sleep(ctx, cfg.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	after, err := member.Usage()
	cancel()
	wg.Wait()
	if err != nil {
		return Result{}, err
	}
	r := Result{Elapsed: elapsed, ValueBytes: len(value), Etcd: after.Sub(before)}
	var all []time.Duration
	for w := range lats {
		all = append(all, lats[w]...)
		r.Errors += errCounts[w]
	}
	r.Puts = int64(len(all))
	r.Rate = stats.Rate(r.Puts, elapsed)
	r.Latency = stats.Summarize(all)
	return r, nil
}
