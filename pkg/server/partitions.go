package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/poll"
)

// partitionStore is where kube-apiserver reaches a store partition.
type partitionStore struct {
	partition constants.StorePartition
	urls      []string
}

// partitionMember is this server's member of the partition p.
func (s *Server) partitionMember(c *certs, p constants.StorePartition) etcd.Member {
	return s.clusterMember(etcd.Member{Name: p.Name, Partition: p.Name, DataDir: s.dir().EtcdPartition(p.Name), Host: "::1",
		Port: s.cfg.EtcdPort + p.PortOffset, TLS: s.etcdServerTLS(c), QuotaBytes: s.cfg.PartitionQuotaBytes, LocalSocket: s.localSocket(p.Name)})
}

// wantLayout is the layout --etcd-partitions asks for.
func (s *Server) wantLayout() etcd.Layout {
	layout := etcd.Layout{Partitions: []string{}}
	for _, p := range s.cfg.Partitions {
		layout.Partitions = append(layout.Partitions, p.Name)
	}
	return layout
}

// settleLayout checks --etcd-partitions against the layout the durable
// etcd records, and records it on a cluster that has none: a new cluster
// takes the flag's; a cluster that ran without partitions keeps none,
// since its resources are in the durable etcd already. While a migration
// is under way, the flag must be the layout it moves to.
func (s *Server) settleLayout(ctx context.Context, durable *clientv3.Client) error {
	if err := s.seeLayout(ctx, durable); err != nil {
		return err
	}
	if migrating, err := s.checkMigration(ctx, durable); migrating || err != nil {
		return err
	}
	want := s.wantLayout()
	recorded, ok, err := etcd.ReadLayout(ctx, durable)
	if err != nil {
		return err
	}
	if !ok {
		ran, err := etcd.HasRegistry(ctx, durable)
		if err != nil {
			return err
		}
		if ran && len(want.Partitions) > 0 {
			return fmt.Errorf("--etcd-partitions %s: this cluster was made without partitions and every resource is in its durable etcd: start the server without --etcd-partitions%s",
				strings.Join(want.Partitions, ","), s.migrateFix())
		}
		if recorded, err = etcd.RecordLayout(ctx, durable, want); err != nil {
			return err
		}
		if slices.Equal(recorded.Partitions, want.Partitions) {
			// Recorded now, by this server or another starting with it.
			if err := s.seeLayout(ctx, durable); err != nil {
				return err
			}
		}
	}
	return requireLayout(recorded, want, s.migrateFix())
}

// seeLayout notes the revisions of the layout and migration records
// before they are checked: recordServerLayout records this server's
// layout only if they are unchanged.
func (s *Server) seeLayout(ctx context.Context, durable *clientv3.Client) error {
	revs, err := etcd.ReadLayoutRevisions(ctx, durable)
	s.layoutSeen = revs
	return err
}

// checkLayout reads the layout the durable etcd records and refuses
// --etcd-partitions other than it (none recorded: a cluster of a release
// before partitions, which has none), or, during a migration, other than
// the layout it moves to.
func (s *Server) checkLayout(ctx context.Context, durable *clientv3.Client) error {
	if err := s.seeLayout(ctx, durable); err != nil {
		return err
	}
	if migrating, err := s.checkMigration(ctx, durable); migrating || err != nil {
		return err
	}
	recorded, _, err := etcd.ReadLayout(ctx, durable)
	if err != nil {
		return err
	}
	return requireLayout(recorded, s.wantLayout(), s.migrateFix())
}

// checkMigration reads the migration under way, if any, and refuses
// --etcd-partitions other than the layout it moves to.
func (s *Server) checkMigration(ctx context.Context, durable *clientv3.Client) (migrating bool, err error) {
	mig, ok, err := etcd.ReadMigration(ctx, durable)
	if err != nil || !ok {
		return false, err
	}
	want := s.wantLayout()
	if !slices.Equal(mig.To, want.Partitions) {
		return true, fmt.Errorf("--etcd-partitions=%s: the cluster is moving %s into partitions of their own (k1m etcd-partitions migrate): give every server --etcd-partitions=%s",
			strings.Join(want.Partitions, ","), strings.Join(mig.Moved(), ", "), strings.Join(mig.To, ","))
	}
	s.migration = &mig
	return true, nil
}

// moving tells whether a migration under way moves partition's resource.
func (s *Server) moving(partition string) bool {
	return s.migration != nil && slices.Contains(s.migration.Moved(), partition)
}

// migrateFix is what a layout refusal adds on how to change the layout:
// k1m etcd-partitions migrate, which moves resources out of an embedded
// durable etcd only (beside an external one the layout is the cluster's
// from its start).
func (s *Server) migrateFix() string {
	if len(s.cfg.ExternalDurable) > 0 {
		return ""
	}
	return ", and move resources with k1m etcd-partitions migrate"
}

// requireLayout refuses a server whose --etcd-partitions (want) are not
// the cluster's (recorded); migrateFix ends the message.
func requireLayout(recorded, want etcd.Layout, migrateFix string) error {
	if slices.Equal(recorded.Partitions, want.Partitions) {
		return nil
	}
	fix := "start every server without --etcd-partitions"
	if len(recorded.Partitions) > 0 {
		fix = "give every server --etcd-partitions=" + strings.Join(recorded.Partitions, ",")
	}
	fix += migrateFix
	return fmt.Errorf("--etcd-partitions=%s: the cluster keeps %s in partitions of their own (recorded in its durable etcd when it was made): %s",
		strings.Join(want.Partitions, ","), describePartitions(recorded.Partitions), fix)
}

// partitionsFlag is the --etcd-partitions flag a joining server needs
// (" --etcd-partitions=pods,nodes"; "" without partitions).
func partitionsFlag(layout etcd.Layout) string {
	if len(layout.Partitions) == 0 {
		return ""
	}
	return " --etcd-partitions=" + strings.Join(layout.Partitions, ",")
}

// requireJoinLayout checks a joining server's --etcd-partitions against
// the layout the cluster's durable etcd records.
func (s *Server) requireJoinLayout(ctx context.Context, clientTLS etcd.TLS) error {
	cli, err := etcd.NewClient(s.member.seeds, clientTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	return s.checkLayout(ctx, cli)
}

// requireNoOtherPartitionData refuses a reset or restore that would leave
// a partition's data as it is: one with data here that --etcd-partitions
// does not name would keep its old members, without a quorum.
func (s *Server) requireNoOtherPartitionData() error {
	for _, p := range constants.StorePartitions {
		if slices.ContainsFunc(s.cfg.Partitions, func(q constants.StorePartition) bool { return q.Name == p.Name }) {
			continue
		}
		if dir := s.dir().EtcdPartition(p.Name); etcd.HasData(dir) {
			return fmt.Errorf("--etcd-partitions: %s holds the %s partition's data, which a reset without it would leave with its old members: give the server's --etcd-partitions (with %s) (nothing was changed)", dir, p.Name, p.Name)
		}
	}
	return nil
}

func describePartitions(names []string) string {
	if len(names) == 0 {
		return "no resource"
	}
	return strings.Join(names, ", ")
}

// phasePartitions settles the cluster's layout and starts this server's
// member of every partition, each kept like the durable etcd: a server
// without data joins the members the durable etcd records (as a learner,
// promoted once it has caught up); the first server makes the group.
func (s *Server) phasePartitions(ctx context.Context, c *certs, durable *etcd.Running) ([]*etcd.Running, error) {
	if durable == nil {
		return nil, nil // an external durable store: each partition an external etcd too (externalPartitionStores)
	}
	cli, err := etcd.NewClient([]string{durable.Member.ClientURL()}, EtcdClientTLS(s.cfg.DataDir))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	if err := s.settleLayout(ctx, cli); err != nil {
		return nil, err
	}
	var started []*etcd.Running
	stopAll := func() {
		for _, r := range started {
			r.Stop()
		}
	}
	for _, p := range s.cfg.Partitions {
		r, err := s.startPartition(ctx, cli, durable, s.partitionMember(c, p))
		if err != nil {
			stopAll()
			return nil, err
		}
		started = append(started, r)
	}
	if err := s.recordServerLayout(ctx, cli); err != nil {
		stopAll()
		return nil, err
	}
	return started, nil
}

// startPartition starts m, this server's member of a partition, and
// records where it serves.
func (s *Server) startPartition(ctx context.Context, durableCli *clientv3.Client, durable *etcd.Running, m etcd.Member) (*etcd.Running, error) {
	report := func(msg string) { s.step("%s", msg) }
	seeds, err := etcd.PartitionMembers(ctx, durableCli, m.Partition, m.Name)
	if err != nil {
		return nil, err
	}
	if !etcd.HasData(m.DataDir) {
		if m, seeds, err = s.newPartitionMember(ctx, durableCli, durable, m, seeds); err != nil {
			return nil, err
		}
	}
	r, err := etcd.Start(ctx, m)
	if err != nil {
		return nil, err
	}
	if err := s.joinedPartition(ctx, r, seeds); err != nil {
		r.Stop()
		return nil, err
	}
	if err := etcd.RecordPartitionMember(ctx, durableCli, m.Partition, r.Member); err != nil {
		r.Stop()
		return nil, err
	}
	if r.Member.Name != m.Partition {
		// A lone server's member was recorded under the partition's
		// name, at its loopback address; --cluster-init renamed it.
		if err := etcd.ForgetPartitionMember(ctx, durableCli, m.Partition, m.Partition); err != nil {
			r.Stop()
			return nil, err
		}
	}
	if err := r.HousekeepAtStart(ctx, report); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// newPartitionMember prepares m, this server's member of a partition,
// when it has no data: it joins the members recorded (seeds, as a
// learner); during a migration that moves the partition's resource, the
// first server seeds the partition from its durable etcd and the others
// wait for it; otherwise the first server makes the group.
func (s *Server) newPartitionMember(ctx context.Context, durableCli *clientv3.Client, durable *etcd.Running, m etcd.Member, seeds []string) (etcd.Member, []string, error) {
	report := func(msg string) { s.step("%s", msg) }
	clientTLS := EtcdClientTLS(s.cfg.DataDir)
	// With no other member recorded, any record is this server's.
	recorded, err := etcd.PartitionMembers(ctx, durableCli, m.Partition, "")
	if err != nil {
		return m, nil, err
	}
	if len(seeds) == 0 && len(recorded) == 0 && s.moving(m.Partition) {
		seeded, err := s.seedPartition(ctx, durableCli, durable, &m)
		if err != nil || seeded {
			return m, nil, err
		}
		if seeds, err = etcd.PartitionMembers(ctx, durableCli, m.Partition, m.Name); err != nil {
			return m, nil, err
		}
	}
	switch {
	case len(seeds) > 0:
		joined, err := etcd.Join(ctx, seeds, clientTLS, m, report)
		if err != nil {
			return m, nil, fmt.Errorf("joining the %s partition's members %s: %w", m.Partition, strings.Join(seeds, ", "), err)
		}
		return joined, seeds, nil
	case len(durable.OtherClientURLs()) > 0:
		// Another group would split the partition: kube-apiservers
		// would each see their own.
		return m, nil, fmt.Errorf("the %s partition records no member to join, yet this server's durable etcd has peers: start a server that has the partition's data first", m.Partition)
	case len(recorded) > 0:
		// This server's member ran, and its data is gone: an empty
		// group would drop every object of the partition.
		return m, nil, fmt.Errorf("the %s partition's data in %s is gone, yet the durable etcd records this server's member of it: restore a snapshot (k1m server --cluster-reset --cluster-reset-restore-path FILE)", m.Partition, m.DataDir)
	}
	if m.ClusterToken, err = etcd.PartitionToken(m.Partition); err != nil {
		return m, nil, err
	}
	s.step("starting the %s partition's etcd group (%s)", m.Partition, m.DataDir)
	return m, nil, nil
}

// seedPartition seeds the partition of m from this server's durable etcd
// if this server is the first to claim it (seeded), or waits until the
// server that claimed it records its member.
func (s *Server) seedPartition(ctx context.Context, durableCli *clientv3.Client, durable *etcd.Running, m *etcd.Member) (seeded bool, err error) {
	holder, err := etcd.ClaimSeed(ctx, durableCli, m.Partition, s.nodeName)
	if err != nil {
		return false, err
	}
	if holder != s.nodeName {
		s.step("waiting for server %s to seed the %s partition (k1m etcd-partitions migrate)", holder, m.Partition)
		err := poll.Until(ctx, 2*time.Second, partitionSeedWait, "server "+holder+" seeding the "+m.Partition+" partition", func(ctx context.Context) error {
			urls, err := etcd.PartitionMembers(ctx, durableCli, m.Partition, m.Name)
			if err == nil && len(urls) == 0 {
				err = errors.New("no member recorded yet")
			}
			return err
		})
		if err != nil {
			return false, fmt.Errorf("%w: start server %s with --etcd-partitions=%s, or, if it is gone, remove it (k1m server remove %s), which lets another server seed it",
				err, holder, strings.Join(s.wantLayout().Partitions, ","), holder)
		}
		return false, nil
	}
	p, _ := constants.StorePartitionNamed(m.Partition)
	if m.ClusterToken, err = etcd.PartitionToken(m.Partition); err != nil {
		return false, err
	}
	s.step("seeding the %s partition from this server's durable etcd (k1m etcd-partitions migrate)", m.Partition)
	bump := uint64(time.Now().UnixMicro())
	return true, etcd.SeedPartition(ctx, durable.Member.ClientURL(), EtcdClientTLS(s.cfg.DataDir), *m, p.KeyPrefix, bump, func(msg string) { s.step("%s", msg) })
}

// partitionSeedWait bounds a server's wait for another to seed a
// partition: the copy of a durable etcd of several GiB takes minutes.
const partitionSeedWait = 30 * time.Minute

// recordServerLayout records the layout this server's kube-apiserver
// starts with, which k1m etcd-partitions migrate waits on.
func (s *Server) recordServerLayout(ctx context.Context, durable *clientv3.Client) error {
	return etcd.RecordServerLayout(ctx, durable, s.nodeName, etcd.ServerLayout{Partitions: s.wantLayout().Partitions, Address: apiURL(s.advertise, s.cfg.HTTPSPort)}, s.layoutSeen)
}

// joinedPartition makes a clustered server's running member reachable by
// the other servers and a voting member.
func (s *Server) joinedPartition(ctx context.Context, r *etcd.Running, seeds []string) error {
	if !s.member.clustered {
		return nil
	}
	clientTLS := EtcdClientTLS(s.cfg.DataDir)
	if moved, err := r.SetPeerURL(ctx, clientTLS); err != nil {
		return err
	} else if moved {
		s.step("%s partition etcd %s: now reachable by other servers at %s (--cluster-init)", r.Member.Partition, r.Member.Name, r.Member.PeerURL())
	}
	if others := r.OtherClientURLs(); len(others) > 0 {
		seeds = others
	}
	if len(seeds) == 0 {
		return nil
	}
	return r.Promote(ctx, seeds, clientTLS, func(msg string) { s.step("%s", msg) })
}

// remotePartitions are, on an API-server-only server, the members of
// every partition the durable etcd records, once --etcd-partitions is
// checked against its layout.
func (s *Server) remotePartitions(ctx context.Context, durable *clientv3.Client) ([]partitionStore, error) {
	if err := s.checkLayout(ctx, durable); err != nil {
		return nil, err
	}
	if err := s.recordServerLayout(ctx, durable); err != nil {
		return nil, err
	}
	var out []partitionStore
	for _, p := range s.cfg.Partitions {
		urls, err := etcd.PartitionMembers(ctx, durable, p.Name, "")
		if err != nil {
			return nil, err
		}
		if len(urls) == 0 {
			return nil, errors.New("--disable-etcd: the cluster records no member of the " + p.Name + " partition: start a server with etcd first")
		}
		out = append(out, partitionStore{partition: p, urls: urls})
	}
	return out, nil
}

// LocalSnapshotSources are the members a snapshot on this machine reads:
// the server's durable etcd at etcdPort and its member of every partition
// the durable etcd records (k1m etcd-snapshot save).
func LocalSnapshotSources(ctx context.Context, dataDir string, etcdPort int) (etcd.SnapshotSources, error) {
	src := etcd.SnapshotSources{Durable: DurableEtcdURL(etcdPort)}
	cli, err := etcd.NewClient([]string{src.Durable}, EtcdClientTLS(dataDir))
	if err != nil {
		return etcd.SnapshotSources{}, err
	}
	defer cli.Close()
	layout, _, err := etcd.ReadLayout(ctx, cli)
	if err != nil {
		return etcd.SnapshotSources{}, err
	}
	for _, name := range layout.Partitions {
		p, ok := constants.StorePartitionNamed(name)
		if !ok {
			return etcd.SnapshotSources{}, fmt.Errorf("the cluster records a partition %q this release does not know", name)
		}
		src.Partitions = append(src.Partitions, etcd.PartitionSource{Name: name, Endpoint: DurableEtcdURL(etcdPort + p.PortOffset)})
	}
	return src, nil
}
