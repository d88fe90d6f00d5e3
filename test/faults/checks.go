package faults

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/test/clustercheck"
)

// The etcd client ports every server keeps (k1m server's defaults).
const (
	durablePort = 2379
	noFsyncPort = 2381
)

// leaseFresh is how recent every node Lease must be, through every
// server, for the cluster to count as converged: one lease duration at
// k1m's default profile (10 s renewals, 40 s).
const leaseFresh = 40 * time.Second

// converged is nil once the cluster is whole again: every server lists
// the same voting members (every server) in both etcds, every node is
// Ready and every node Lease fresh and the same through every server.
func (f *Fixture) converged(ctx context.Context, healed time.Time) error {
	return errors.Join(f.membersAgree(ctx), f.nodesReady(ctx), f.leasesAgree(ctx, f.now().excused, healed))
}

// membersAgree wants every server's durable and no-fsync etcd to list
// exactly the servers, each a voting member.
func (f *Fixture) membersAgree(ctx context.Context) error {
	var want []string
	for i := 1; i <= Servers; i++ {
		want = append(want, f.ServerNode(i))
	}
	sort.Strings(want)
	var errs []error
	for i := 1; i <= Servers; i++ {
		for _, port := range []int{durablePort, noFsyncPort} {
			got, err := f.members(ctx, i, port)
			if err == nil && !reflect.DeepEqual(got, want) {
				err = fmt.Errorf("members %v, want %v", got, want)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("server %d's %s etcd: %w", i, storeName(port), err))
			}
		}
	}
	return errors.Join(errs...)
}

func storeName(port int) string {
	if port == noFsyncPort {
		return "no-fsync"
	}
	return "durable"
}

// members lists the members server i's etcd at port knows, a learner
// marked so.
func (f *Fixture) members(ctx context.Context, i, port int) ([]string, error) {
	s := f.H.Server(i)
	cli, err := etcd.NewClient([]string{fmt.Sprintf("https://[%s]:%d", s.Addr, port)}, server.EtcdClientTLS(s.DataDir))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// etcd 3.5 answers a member list from the member asked: its own view.
	list, err := etcd.Members(ctx, cli)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range list {
		name := m.Name
		if m.IsLearner {
			name += " (learner)"
		}
		names = append(names, name)
	}
	return names, nil
}

// nodesReady wants every node Ready through every server.
func (f *Fixture) nodesReady(ctx context.Context) error {
	var errs []error
	for i := 1; i <= Servers; i++ {
		list, err := f.Client(i).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("nodes through server %d: %w", i, err))
			continue
		}
		var notReady []string
		for _, n := range list.Items {
			if !clustercheck.Ready(&n) {
				notReady = append(notReady, n.Name)
			}
		}
		if len(list.Items) != Nodes || len(notReady) > 0 {
			errs = append(errs, fmt.Errorf("through server %d: %d nodes, NotReady: %v", i, len(list.Items), notReady))
		}
	}
	return errors.Join(errs...)
}

// leasesAgree wants the same node Leases (names and holders) through
// every server, each renewed within leaseFresh, and those of the excused
// nodes renewed since healed: a node whose server was down can still show
// its last renewal from before the fault, and Ready with it, until the
// node controller's grace period ends; its excuse must not end before its
// kubelet is back.
func (f *Fixture) leasesAgree(ctx context.Context, excused map[string]bool, healed time.Time) error {
	var errs []error
	var first []string
	for i := 1; i <= Servers; i++ {
		list, err := f.Client(i).CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("leases through server %d: %w", i, err))
			continue
		}
		var seen, stale, notSince []string
		for _, l := range list.Items {
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			seen = append(seen, l.Name+"="+holder)
			switch {
			case l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > leaseFresh:
				stale = append(stale, l.Name)
			case excused[l.Name] && !l.Spec.RenewTime.After(healed):
				notSince = append(notSince, l.Name)
			}
		}
		sort.Strings(seen)
		if len(stale) > 0 {
			errs = append(errs, fmt.Errorf("through server %d: Leases not renewed within %s: %v", i, leaseFresh, stale))
		}
		if len(notSince) > 0 {
			errs = append(errs, fmt.Errorf("through server %d: Leases of nodes whose server was out not renewed since the heal: %v", i, notSince))
		}
		if len(seen) != Nodes {
			errs = append(errs, fmt.Errorf("through server %d: %d node Leases (%s), want %d", i, len(seen), strings.Join(seen, " "), Nodes))
		}
		if first == nil {
			first = seen
		} else if !reflect.DeepEqual(seen, first) {
			errs = append(errs, fmt.Errorf("server %d sees Leases %v, another server %v", i, seen, first))
		}
	}
	return errors.Join(errs...)
}
