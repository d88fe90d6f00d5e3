package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/version"
)

// alarmCheckInterval is how often a running server looks at both etcds'
// alarms.
const alarmCheckInterval = 30 * time.Second

// diskCheckInterval is how often it reads the free space under both etcds:
// often, since a disk fills faster than a quota (etcd.DefaultDiskReserveBytes
// is what that leaves time for).
const diskCheckInterval = 2 * time.Second

// EtcdClientTLS is the durable etcd's one client certificate (it is
// kube-apiserver's), which tools on the server's machine use too: k1m
// etcd-snapshot reads it from DATA-DIR/tls.
func EtcdClientTLS(dataDir string) etcd.TLS { return etcd.ClientTLSIn(TLSDir(dataDir)) }

// DurableEtcdURL is the durable etcd's client URL for a server's --etcd-port.
func DurableEtcdURL(port int) string { return etcd.Member{Host: "::1", Port: port}.ClientURL() }

func (s *Server) durableMember(c *certs) etcd.Member {
	return s.clusterMember(etcd.Member{Name: "durable", DataDir: s.dir().Etcd(), Host: "::1", Port: s.cfg.EtcdPort,
		TLS: s.etcdServerTLS(c), QuotaBytes: s.cfg.EtcdQuotaBytes, LocalSocket: s.localSocket("durable")})
}

func (s *Server) noFsyncMember(c *certs) etcd.Member {
	return s.clusterMember(etcd.Member{Name: "nofsync", DataDir: s.cfg.NoFsyncDataDir, Host: "::1", Port: s.cfg.NoFsyncEtcdPort, NoFsync: true,
		TLS: s.etcdServerTLS(c), QuotaBytes: s.cfg.NoFsyncQuotaBytes, LocalSocket: s.localSocket("no-fsync")})
}

// EtcdSocketDir is where a server's embedded etcds serve its own
// kube-apiserver over unix sockets, without TLS (etcd.Member.LocalSocket):
// root's alone.
func EtcdSocketDir(dataDir string) string { return datadir.Server(dataDir).EtcdSockets() }

// localSocket is the unix socket of the member for store (durable,
// no-fsync), or none when kube-apiserver reaches its stores over TLS
// (socketDir says why).
func (s *Server) localSocket(store string) string {
	dir, err := s.socketDir()
	if dir == "" || err != nil {
		return ""
	}
	return filepath.Join(dir, store+".sock")
}

// socketDir is where the server's etcds serve its kube-apiserver on unix
// sockets: none in the stock build or with an external etcd
// (kube-apiserver's etcd TLS flags are one setting for every store), and
// none, with the reason, when the data directory cannot hold them.
func (s *Server) socketDir() (string, error) {
	if !flavor.LocalEtcdSockets || s.cfg.Datastore.External() {
		return "", nil
	}
	dir, err := filepath.Abs(EtcdSocketDir(s.cfg.DataDir))
	if err != nil {
		return "", err
	}
	// Every store or none: the longest name decides.
	if longest := filepath.Join(dir, longestSocketName(s.cfg.Partitions)); len(longest) > etcd.MaxSocketPath {
		return "", fmt.Errorf("a unix socket under --data-dir %s would be %d bytes long, over the %d a socket path takes", s.cfg.DataDir, len(longest), etcd.MaxSocketPath)
	}
	if strings.ContainsAny(dir, ",;") {
		return "", fmt.Errorf("--data-dir %s has a ',' or ';', which kube-apiserver's --etcd-servers flags split on", s.cfg.DataDir)
	}
	if err := etcd.CheckSocketDir(dir); err != nil {
		return "", fmt.Errorf("the sockets' directory under --data-dir could be replaced by another user: %w", err)
	}
	return dir, nil
}

// longestSocketName is the longest of the members' socket names
// (durable, no-fsync, the partitions').
func longestSocketName(partitions []constants.StorePartition) string {
	longest := "no-fsync.sock"
	for _, p := range partitions {
		if name := p.Name + ".sock"; len(name) > len(longest) {
			longest = name
		}
	}
	return longest
}

// clusterMember makes m a member other servers reach, when the server is
// one of several: named after the server (member names are unique in a
// cluster) and serving on the advertise address too.
func (s *Server) clusterMember(m etcd.Member) etcd.Member {
	if s.member.clustered {
		m.Name = s.nodeName
		m.PeerHost = s.advertise
	}
	return m
}

func (s *Server) etcdServerTLS(c *certs) etcd.TLS {
	tls := etcd.TLS{CertFile: c.etcdServer.cert, KeyFile: c.etcdServer.key, CAFile: c.etcd.cert}
	if s.cfg.Datastore.External() {
		tls.ClientCAFile = datastoreCABundle(c) // kube-apiserver's client certificate is the external etcd's
	}
	return tls
}

// phaseEtcd starts the embedded etcds: each store's unless it is an
// external etcd (then nil). The no-fsync one always starts empty: its
// files are not trusted after any stop (a crash or power loss may leave
// them half-written, and they hold only Leases and Events, which every
// kubelet and component writes again within one renew interval). The
// durable one gets its start housekeeping (alarms, defragmentation). The
// store partitions start between the two: a no-fsync member may wait for
// its group's next generation, which the partitions' writes need not.
func (s *Server) phaseEtcd(ctx context.Context, c *certs) (etcds, error) {
	durableMember, noFsyncMember := s.durableMember(c), s.noFsyncMember(c)
	embedDurable, embedNoFsync := len(s.cfg.ExternalDurable) == 0, len(s.cfg.ExternalNoFsync) == 0 && flavor.SeparateNoFsyncStore
	oneStore := !flavor.SeparateNoFsyncStore && len(s.cfg.ExternalNoFsync) == 0
	switch {
	case oneStore && embedDurable:
		s.step("starting etcd (%s): every resource in it, Events and Leases too (the stock build's one store)", durableMember.DataDir)
	case oneStore:
		s.step("no embedded etcd: every resource in the external etcd at %s (the stock build's one store)", strings.Join(s.cfg.ExternalDurable, ","))
		return etcds{}, nil
	case embedDurable && embedNoFsync:
		s.step("starting etcd (durable, %s) and etcd (no fsync, %s, started empty)", durableMember.DataDir, noFsyncMember.DataDir)
	case embedDurable:
		s.step("starting etcd (durable, %s); Events and Leases in the external etcd at %s", durableMember.DataDir, strings.Join(s.cfg.ExternalNoFsync, ","))
	case embedNoFsync:
		s.step("starting etcd (no fsync, %s, started empty); the durable store is the external etcd at %s", noFsyncMember.DataDir, strings.Join(s.cfg.ExternalDurable, ","))
	default:
		s.step("no embedded etcd: the durable store is the external etcd at %s, Events and Leases at %s", strings.Join(s.cfg.ExternalDurable, ","), strings.Join(s.cfg.ExternalNoFsync, ","))
		return etcds{}, nil
	}
	// First: on a shared disk the discarded store's space counts toward
	// the durable etcd's reserve, which etcd.Start checks.
	if embedNoFsync {
		if err := etcd.DiscardData(noFsyncMember.DataDir); err != nil {
			return etcds{}, fmt.Errorf("discarding the no-fsync etcd's data in %s: %w", noFsyncMember.DataDir, err)
		}
		if err := s.removeLegacyNoFsyncDir(); err != nil {
			return etcds{}, err
		}
	}
	var durable *etcd.Running
	if embedDurable {
		var err error
		if durable, err = s.startDurable(ctx, durableMember); err != nil {
			return etcds{}, err
		}
		if err := durable.HousekeepAtStart(ctx, func(msg string) { s.step("%s", msg) }); err != nil {
			durable.Stop()
			return etcds{}, err
		}
	}
	partitions, err := s.phasePartitions(ctx, c, durable)
	started := etcds{durable: durable, partitions: partitions, partitionErrs: partitionErrors(partitions)}
	if err != nil {
		started.stop()
		return etcds{}, err
	}
	if !embedNoFsync {
		return started, nil
	}
	if started.noFsync, err = s.startNoFsync(ctx, durable, noFsyncMember); err != nil {
		started.stop()
		return etcds{}, err
	}
	return started, nil
}

// startDurable starts the durable etcd: a joining server's is added to
// the cluster as a learner first and promoted once it has caught up (a
// restarted learner too); a --cluster-init on a lone server's data moves
// its member to the advertise address. A server of several with data is
// refused first when the others run another incarnation
// (checkIncarnation); once it runs, its incarnation is recorded.
func (s *Server) startDurable(ctx context.Context, m etcd.Member) (*etcd.Running, error) {
	report := func(msg string) { s.step("%s", msg) }
	clientTLS := EtcdClientTLS(s.cfg.DataDir)
	var err error
	if s.member.joining {
		// Before its member votes: a server refused after it would leave
		// a voter that never runs, and a cluster of two without a quorum.
		if err := s.requireJoinLayout(ctx, clientTLS); err != nil {
			return nil, err
		}
		// Join's errors say what to change (the node name of a duplicate,
		// the members it could not reach).
		m, err = etcd.Join(ctx, s.member.seeds, clientTLS, m, report)
		if errors.Is(err, etcd.ErrPeerURLTaken) {
			return nil, fmt.Errorf("--advertise-address %s: %w", s.advertise, err)
		}
		if err != nil {
			return nil, err
		}
	}
	hadData := durableHasData(s.cfg.DataDir)
	if s.member.clustered && !s.member.joining && hadData {
		if err := s.checkIncarnation(ctx); err != nil {
			return nil, err
		}
	}
	durable, err := etcd.Start(ctx, m)
	if err != nil {
		return nil, err
	}
	if !s.member.clustered {
		return durable, s.recordOrStop(ctx, durable, hadData)
	}
	if moved, err := durable.SetPeerURL(ctx, clientTLS); err != nil {
		durable.Stop()
		return nil, err
	} else if moved {
		s.step("etcd %s: now reachable by other servers at %s (--cluster-init)", m.Name, durable.Member.PeerURL())
	}
	seeds := s.member.seeds
	if !s.member.joining {
		seeds = durable.OtherClientURLs()
	}
	if err := durable.Promote(ctx, seeds, clientTLS, report); err != nil {
		durable.Stop()
		return nil, err
	}
	return durable, s.recordOrStop(ctx, durable, hadData)
}

// recordOrStop records the incarnation the running durable etcd is of,
// or stops it when that fails.
func (s *Server) recordOrStop(ctx context.Context, durable *etcd.Running, hadData bool) error {
	if err := s.recordIncarnation(ctx, durable, hadData); err != nil {
		durable.Stop()
		return fmt.Errorf("recording the cluster's incarnation: %w", err)
	}
	return nil
}

// removeLegacyNoFsyncDir deletes DATA-DIR/etcd-ephemeral, left by an
// earlier release, when the no-fsync etcd now lives elsewhere: its data
// would be discarded at this start anyway.
func (s *Server) removeLegacyNoFsyncDir() error {
	old, err := filepath.Abs(s.dir().LegacyNoFsyncEtcd())
	if err != nil {
		return err
	}
	inUse, err := filepath.Abs(s.cfg.NoFsyncDataDir)
	if err != nil {
		return err
	}
	if fsutil.Within(inUse, old) || fsutil.Within(old, inUse) {
		return nil // given as --no-fsync-data-dir, or around it: in use
	}
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	s.step("removing %s, the no-fsync etcd's directory of an earlier release (now %s)", old, s.cfg.NoFsyncDataDir)
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("removing the no-fsync etcd's old directory: %w", err)
	}
	return nil
}

// startNoFsync starts the no-fsync etcd, empty: for a server of several
// in the current no-fsync group (etcd.StartNoFsync), which the durable
// store (durable, or nil: the external etcd) records, and kept in the
// current group for as long as the server runs (etcd.NoFsyncMember's
// Follow, on a client of the durable store closed when ctx ends).
func (s *Server) startNoFsync(ctx context.Context, durable *etcd.Running, m etcd.Member) (*etcd.NoFsyncMember, error) {
	if !s.member.clustered {
		r, err := etcd.Start(ctx, m)
		if err != nil {
			return nil, err
		}
		return etcd.LoneNoFsync(r), nil
	}
	endpoints, tls := s.durableClientTarget(durable)
	cli, err := etcd.NewClient(endpoints, tls)
	if err != nil {
		return nil, err
	}
	n, err := etcd.StartNoFsync(ctx, cli, m, EtcdClientTLS(s.cfg.DataDir), func(msg string) { s.step("%s", msg) })
	if err != nil {
		cli.Close()
		return nil, err
	}
	go func() {
		n.Follow(ctx)
		cli.Close()
	}()
	return n, nil
}

// phaseHousekeeping starts what runs beside the etcds for as long as the
// server does: the alarm and disk watches of every member, and scheduled
// snapshots.
func (s *Server) phaseHousekeeping(ctx context.Context, c *certs, local etcds) {
	durable, noFsync := local.durable, local.noFsync
	report := func(msg string) { s.warn("%s", msg) }
	watch := func(ctx context.Context, r *etcd.Running) {
		go r.WatchAlarms(ctx, alarmCheckInterval, report)
		go r.WatchDisk(ctx, diskCheckInterval, report)
	}
	// An external etcd is the operator's to watch.
	if durable != nil {
		watch(ctx, durable)
	}
	for _, r := range local.partitions {
		watch(ctx, r)
	}
	if noFsync != nil {
		// Each member that replaces it gets its own watches (they end
		// with the member, or with the server).
		noFsync.OnStart(func(mctx context.Context, r *etcd.Running) {
			wctx, cancel := context.WithCancel(ctx)
			context.AfterFunc(mctx, cancel)
			watch(wctx, r)
		})
	}
	switch {
	case durable == nil:
		s.step("no scheduled etcd snapshots here: the durable store is the external etcd at %s, which its operator snapshots", strings.Join(s.cfg.ExternalDurable, ","))
		return
	case s.cfg.EtcdSnapshots.Disable:
		s.step("scheduled etcd snapshots are off (--etcd-disable-snapshots)")
		return
	}
	// Validate parsed it already.
	schedule, _ := cron.ParseStandard(s.cfg.EtcdSnapshots.ScheduleCron)
	s.step("etcd snapshots %q into %s, keeping %d", s.cfg.EtcdSnapshots.ScheduleCron, s.cfg.EtcdSnapshots.Dir, s.cfg.EtcdSnapshots.Retention)
	go s.runSnapshots(ctx, schedule, snapshotSources(durable, local.partitions))
}

// snapshotSources are the members a snapshot of this server's stores
// reads: the durable etcd and every partition.
func snapshotSources(durable *etcd.Running, partitions []*etcd.Running) etcd.SnapshotSources {
	src := etcd.SnapshotSources{Durable: durable.Member.ClientURL()}
	for _, r := range partitions {
		src.Partitions = append(src.Partitions, etcd.PartitionSource{Name: r.Member.Partition, Endpoint: r.Member.ClientURL()})
	}
	return src
}

func (s *Server) runSnapshots(ctx context.Context, schedule cron.Schedule, src etcd.SnapshotSources) {
	store := etcd.Snapshots{Dir: s.cfg.EtcdSnapshots.Dir}
	for {
		next := schedule.Next(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		now := time.Now()
		info, err := store.Save(ctx, src, EtcdClientTLS(s.cfg.DataDir), etcd.SnapshotName(etcd.ScheduledPrefix, s.nodeName, now), s.nodeName, version.String(), now)
		if err != nil {
			s.warn("scheduled etcd snapshot failed: %v", err)
			continue
		}
		s.step("etcd snapshot %s: %d bytes, revision %d", info.Name, info.Size, info.Revision)
		deleted, err := store.Prune(etcd.ScheduledPrefix, s.cfg.EtcdSnapshots.Retention)
		if err != nil {
			s.warn("pruning etcd snapshots: %v", err)
		}
		for _, name := range deleted {
			s.step("etcd snapshot %s deleted (--etcd-snapshot-retention %d)", name, s.cfg.EtcdSnapshots.Retention)
		}
	}
}

// resetRecord is what DATA-DIR/cluster-reset.json keeps of a reset, so
// that a server left with --cluster-reset in its unit file does not reset
// again at every restart, throwing away what was written since.
type resetRecord struct {
	RestoredFrom string    `json:"restoredFrom,omitempty"`
	At           time.Time `json:"at"`
}

func (s *Server) resetRecordPath() string { return s.dir().ClusterReset() }

// phaseClusterReset resets the durable etcd, from a snapshot when
// --cluster-reset-restore-path is given, then returns: the server is
// started again without the flags.
func (s *Server) phaseClusterReset(ctx context.Context, c *certs) error {
	if data, err := os.ReadFile(s.resetRecordPath()); err == nil {
		var done resetRecord
		json.Unmarshal(data, &done)
		return fmt.Errorf("--cluster-reset: this server was reset already (%s, at %s) and has not run since: "+
			"start it without --cluster-reset and --cluster-reset-restore-path (or delete %s to reset again)", describeReset(done), done.At.Format(time.RFC3339), s.resetRecordPath())
	}
	record := resetRecord{At: time.Now().UTC()}
	if path := s.cfg.ClusterReset.RestorePath; path != "" {
		record.RestoredFrom = path
	}
	old, _, err := readIncarnation(s.cfg.DataDir)
	if err != nil {
		return err
	}
	next, err := etcd.NewIncarnation(old.Incarnation.ID, describeReset(record), record.At)
	if err != nil {
		return err
	}
	member := s.durableMember(c)
	partitions, err := s.resetPartitionMembers(c)
	if err != nil {
		return err
	}
	if path := record.RestoredFrom; path != "" {
		s.step("restoring the durable etcd from %s%s", path, partitionsNote(partitions))
		// Its own raft cluster ID: members of the old one are refused.
		member.ClusterToken = next.ClusterToken()
		kept, err := etcd.Restore(path, member, partitions)
		if err != nil {
			return fmt.Errorf("--cluster-reset-restore-path: %w (nothing was changed)", err)
		}
		for _, k := range kept {
			s.step("the data it replaced is kept in %s (delete it once the cluster is as it should be)", k)
		}
	} else {
		// The other members are removed, which etcd refuses from then on.
		s.step("resetting the durable etcd to a one-member cluster%s", partitionsNote(partitions))
		member.ForceNewCluster = true
		if err := s.resetPartitions(ctx, partitions); err != nil {
			return err
		}
	}
	if err := s.newIncarnation(ctx, member, next); err != nil {
		return err
	}
	// Leases and Events from before the reset mean nothing now.
	if err := etcd.DiscardData(s.cfg.NoFsyncDataDir); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(record, "", "  ")
	if err := fsutil.WriteFile(s.resetRecordPath(), append(data, '\n'), 0o600); err != nil {
		return err
	}
	s.step("cluster reset done (%s): start the server again without --cluster-reset and --cluster-reset-restore-path", describeReset(record))
	return nil
}

// resetPartitionMembers are this server's partition members as a reset
// or restore makes them: each a new raft group of its own ID.
func (s *Server) resetPartitionMembers(c *certs) ([]etcd.Member, error) {
	if err := s.requireNoOtherPartitionData(); err != nil {
		return nil, err
	}
	var out []etcd.Member
	for _, p := range s.cfg.Partitions {
		m := s.partitionMember(c, p)
		token, err := etcd.PartitionToken(p.Name)
		if err != nil {
			return nil, err
		}
		m.ClusterToken = token
		out = append(out, m)
	}
	return out, nil
}

// resetPartitions makes each partition member the one member of its
// group, as the durable etcd's reset does.
func (s *Server) resetPartitions(ctx context.Context, partitions []etcd.Member) error {
	for _, m := range partitions {
		if !etcd.HasData(m.DataDir) {
			return fmt.Errorf("--cluster-reset: the %s partition has no data in %s to reset (nothing was changed)", m.Partition, m.DataDir)
		}
	}
	for _, m := range partitions {
		m.ForceNewCluster = true
		r, err := etcd.Start(ctx, m)
		if err != nil {
			return fmt.Errorf("--cluster-reset: the %s partition: %w", m.Partition, err)
		}
		r.Stop()
	}
	return nil
}

func partitionsNote(partitions []etcd.Member) string {
	if len(partitions) == 0 {
		return ""
	}
	names := make([]string, len(partitions))
	for i, m := range partitions {
		names[i] = m.Partition
	}
	return " and its partitions " + strings.Join(names, ", ")
}

func describeReset(r resetRecord) string {
	if r.RestoredFrom == "" {
		return "membership reset"
	}
	return "restored from " + r.RestoredFrom
}

// forgetReset is called on a normal start: the next --cluster-reset is a
// new one.
func (s *Server) forgetReset() error {
	if err := os.Remove(s.resetRecordPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
