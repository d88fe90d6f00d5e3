package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/fsutil"
)

// etcds are the server's own etcd members: both nil on an
// API-server-only server (--disable-etcd).
type etcds struct {
	durable *etcd.Running
	noFsync *etcd.NoFsyncMember
	// partitions are its members of the store's partitions, in
	// cfg.Partitions' order; partitionErrs reports the first fatal error
	// of any (nil without partitions).
	partitions    []*etcd.Running
	partitionErrs <-chan error
}

func (e etcds) stop() {
	for _, p := range e.partitions {
		p.Stop()
	}
	if e.noFsync != nil {
		e.noFsync.Stop()
	}
	if e.durable != nil {
		e.durable.Stop()
	}
}

// durableErr and noFsyncErr are the members' fatal error channels; nil
// (never ready) without one.
func (e etcds) durableErr() <-chan error {
	if e.durable == nil {
		return nil
	}
	return e.durable.Err()
}

// partitionErrors is one channel for the members' fatal errors, each
// named by its partition.
func partitionErrors(members []*etcd.Running) <-chan error {
	if len(members) == 0 {
		return nil
	}
	errc := make(chan error, len(members))
	for _, r := range members {
		go func() {
			err, ok := <-r.Err()
			if !ok || err == nil {
				err = errors.New("stopped")
			}
			errc <- fmt.Errorf("the %s partition's etcd: %w", r.Member.Partition, err)
		}()
	}
	return errc
}

func (e etcds) noFsyncErr() <-chan error {
	if e.noFsync == nil {
		return nil
	}
	return e.noFsync.Err()
}

// phaseStores starts this server's etcds with their housekeeping, or on
// an API-server-only server finds the cluster's members; an external
// etcd (--datastore-endpoint, --no-fsync-datastore-endpoint) is claimed
// for this cluster first.
func (s *Server) phaseStores(ctx context.Context, c *certs, caHash string) (etcds, etcdStores, error) {
	if err := s.recordDatastore(); err != nil {
		return etcds{}, etcdStores{}, err
	}
	if s.cfg.Datastore.External() {
		if err := s.writeDatastoreCABundle(c); err != nil {
			return etcds{}, etcdStores{}, err
		}
		if err := s.claimDatastore(ctx, caHash); err != nil {
			return etcds{}, etcdStores{}, err
		}
	}
	if len(s.cfg.ExternalDurable) > 0 && flavor.SeparateNoFsyncStore {
		if err := s.settleExternalLayout(ctx); err != nil {
			return etcds{}, etcdStores{}, err
		}
	}
	if s.cfg.DisableEtcd {
		stores, err := s.phaseRemoteEtcd(ctx)
		stores.tls = s.storeTLS(c)
		return etcds{}, stores, err
	}
	local, err := s.phaseEtcd(ctx, c)
	if err != nil {
		return etcds{}, etcdStores{}, err
	}
	durable, noFsync, partitions := local.durable, local.noFsync, local.partitions
	s.phaseHousekeeping(ctx, c, local)
	if stores, ok := socketStores(memberOf(durable), noFsyncMemberOf(noFsync), partitions); ok {
		s.step("kube-apiserver reaches its etcds over unix sockets in %s, without TLS (the directory is this user's alone)", filepath.Dir(durable.Member.LocalSocket))
		return local, stores, nil
	}
	stores := etcdStores{durable: s.cfg.ExternalDurable, noFsync: s.cfg.ExternalNoFsync, tls: s.storeTLS(c)}
	if durable != nil {
		stores.durable = []string{durable.Member.ClientURL()}
	}
	if noFsync != nil {
		stores.noFsync = []string{noFsync.Member().ClientURL()}
	}
	for _, r := range partitions {
		stores.partitions = append(stores.partitions, partitionStore{partition: partitionNamed(r.Member.Partition), urls: []string{r.Member.ClientURL()}})
	}
	stores.partitions = append(stores.partitions, s.externalPartitionStores()...)
	if _, err := s.socketDir(); err != nil {
		s.step("kube-apiserver reaches its etcds over TLS on loopback: %v", err)
	}
	return local, stores, nil
}

// partitionNamed is the partition a running member is of.
func partitionNamed(name string) constants.StorePartition {
	p, _ := constants.StorePartitionNamed(name)
	return p
}

// socketStores are kube-apiserver's stores when every one is this
// server's own member serving it a local socket: reached there, without
// TLS, so that a write does not pay TLS at both ends of a loopback
// connection (whoever can open the sockets could read the etcd client
// key as well).
func socketStores(durable, noFsync *etcd.Member, partitions []*etcd.Running) (etcdStores, bool) {
	if durable == nil || durable.LocalSocket == "" || (noFsync != nil && noFsync.LocalSocket == "") {
		return etcdStores{}, false
	}
	stores := etcdStores{durable: []string{durable.LocalURL()}}
	if noFsync != nil {
		stores.noFsync = []string{noFsync.LocalURL()}
	}
	for _, r := range partitions {
		if r.Member.LocalSocket == "" {
			return etcdStores{}, false
		}
		stores.partitions = append(stores.partitions, partitionStore{partition: partitionNamed(r.Member.Partition), urls: []string{r.Member.LocalURL()}})
	}
	return stores, true
}

// memberOf and noFsyncMemberOf describe a running member (nil: none).
func memberOf(r *etcd.Running) *etcd.Member {
	if r == nil {
		return nil
	}
	return &r.Member
}

func noFsyncMemberOf(n *etcd.NoFsyncMember) *etcd.Member {
	if n == nil {
		return nil
	}
	m := n.Member()
	return &m
}

// remoteEtcdFile keeps, on an API-server-only server, the durable etcd
// members it last reached: where it starts looking at its next start.
func remoteEtcdFile(dataDir string) string { return datadir.Server(dataDir).EtcdMembers() }

// phaseRemoteEtcd finds the cluster's voting durable members (from those
// the join named, or those it reached last time) and the no-fsync members
// the durable etcd records; an external store is its endpoints.
func (s *Server) phaseRemoteEtcd(ctx context.Context) (etcdStores, error) {
	stores := etcdStores{durable: s.cfg.ExternalDurable, noFsync: s.cfg.ExternalNoFsync, partitions: s.externalPartitionStores()}
	if len(stores.durable) > 0 && len(stores.noFsync) > 0 {
		s.step("no etcd here: kube-apiserver over the external etcds at %s and %s", strings.Join(stores.durable, ","), strings.Join(stores.noFsync, ","))
		return stores, nil
	}
	endpoints, tls := stores.durable, s.datastoreTLS()
	if len(endpoints) == 0 {
		members, err := s.durableMembers(ctx)
		if err != nil {
			return etcdStores{}, err
		}
		stores.durable, endpoints, tls = members, members, EtcdClientTLS(s.cfg.DataDir)
	}
	// The durable etcd records the no-fsync members and, when it is the
	// servers' own, the partitions' (an external one has none).
	findNoFsync, findPartitions := len(stores.noFsync) == 0, len(s.cfg.ExternalDurable) == 0
	if flavor.SeparateNoFsyncStore && (findNoFsync || findPartitions) {
		cli, err := etcd.NewClient(endpoints, tls)
		if err != nil {
			return etcdStores{}, err
		}
		defer cli.Close()
		if findNoFsync {
			if stores.noFsync, err = etcd.RecordedNoFsync(ctx, cli); err != nil {
				return etcdStores{}, err
			}
			if len(stores.noFsync) == 0 {
				return etcdStores{}, errors.New("--disable-etcd: the cluster records no no-fsync member: start a server with etcd first")
			}
		}
		if findPartitions {
			if stores.partitions, err = s.remotePartitions(ctx, cli); err != nil {
				return etcdStores{}, err
			}
			for _, p := range stores.partitions {
				s.step("the %s partition on the cluster's members %s", p.partition.Name, strings.Join(p.urls, ", "))
			}
		}
	}
	if len(stores.noFsync) == 0 {
		s.step("no etcd here (--disable-etcd): kube-apiserver over the cluster's etcd members %s, every resource in them (the stock build's one store)",
			strings.Join(stores.durable, ", "))
		return stores, nil
	}
	s.step("no etcd here (--disable-etcd): kube-apiserver over the cluster's etcd members %s and no-fsync members %s",
		strings.Join(stores.durable, ", "), strings.Join(stores.noFsync, ", "))
	return stores, nil
}

// durableMembers are the voting members of the servers' durable etcd
// cluster, found from those the join named or those reached last time
// (remembered for the next start).
func (s *Server) durableMembers(ctx context.Context) ([]string, error) {
	seeds := s.member.seeds
	if len(seeds) == 0 {
		data, err := os.ReadFile(remoteEtcdFile(s.cfg.DataDir))
		if err == nil {
			err = json.Unmarshal(data, &seeds)
		}
		if err != nil {
			return nil, fmt.Errorf("--disable-etcd: %s: %v: it names the cluster's etcd members (start the server with an empty --data-dir and --server to join again)", remoteEtcdFile(s.cfg.DataDir), err)
		}
	}
	cli, err := etcd.NewClient(seeds, EtcdClientTLS(s.cfg.DataDir))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	members, err := etcd.Members(ctx, cli)
	if err != nil {
		return nil, fmt.Errorf("--disable-etcd: no etcd member of the cluster answers (tried %s): %w", strings.Join(seeds, ", "), err)
	}
	var voting []string
	for _, m := range members {
		if !m.IsLearner {
			voting = append(voting, m.ClientURLs...)
		}
	}
	if len(voting) == 0 {
		return nil, errors.New("--disable-etcd: the cluster records no voting etcd member: start a server with etcd first")
	}
	data, _ := json.Marshal(voting)
	if err := fsutil.WriteFile(remoteEtcdFile(s.cfg.DataDir), append(data, '\n'), 0o600); err != nil {
		return nil, err
	}
	return voting, nil
}
