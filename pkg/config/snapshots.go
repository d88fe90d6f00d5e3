package config

import (
	"errors"
	"fmt"

	"github.com/robfig/cron/v3"
	"github.com/spf13/pflag"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/flavor"
)

// EtcdSnapshots are the durable etcd's scheduled snapshots (k3s's flags
// and defaults).
type EtcdSnapshots struct {
	Disable      bool
	ScheduleCron string
	Retention    int
	Dir          string // default DATA-DIR/snapshots
}

// ClusterReset is a one-off run of `k1m server` that resets the durable
// etcd, from a snapshot when RestorePath is given, and exits.
type ClusterReset struct {
	Enabled     bool
	RestorePath string
}

// Quota bounds of --etcd-quota-backend-bytes: etcd warns above 8 GiB and
// the Kubernetes docs stop there too; below 16 MiB a cluster does not fit.
const (
	MinEtcdQuotaBytes = 16 << 20
	MaxEtcdQuotaBytes = 64 << 30
)

// DefaultSnapshotDir is where snapshots go unless --etcd-snapshot-dir.
func DefaultSnapshotDir(dataDir string) string { return datadir.Server(dataDir).Snapshots() }

func defaultEtcdSnapshots() EtcdSnapshots {
	return EtcdSnapshots{ScheduleCron: "0 */12 * * *", Retention: 5}
}

func (e *EtcdSnapshots) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&e.Disable, "etcd-disable-snapshots", e.Disable, "take no scheduled snapshots of the durable etcd")
	fs.StringVar(&e.ScheduleCron, "etcd-snapshot-schedule-cron", e.ScheduleCron, "when to snapshot the durable etcd, in cron's five fields (minute hour day month weekday)")
	fs.IntVar(&e.Retention, "etcd-snapshot-retention", e.Retention, "scheduled snapshots to keep (older ones are deleted)")
	fs.StringVar(&e.Dir, "etcd-snapshot-dir", e.Dir, "directory of etcd snapshots (default DATA-DIR/snapshots)")
}

func (r *ClusterReset) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&r.Enabled, "cluster-reset", r.Enabled, "reset the durable etcd to a one-member cluster (from --cluster-reset-restore-path when given), then exit")
	fs.StringVar(&r.RestorePath, "cluster-reset-restore-path", r.RestorePath, "etcd snapshot to restore with --cluster-reset (the data it replaces is kept, renamed)")
}

func (e EtcdSnapshots) validate() error {
	var errs []error
	if _, err := cron.ParseStandard(e.ScheduleCron); err != nil {
		errs = append(errs, fmt.Errorf("--etcd-snapshot-schedule-cron %q: %v; want cron's five fields, e.g. \"0 */12 * * *\" (every 12 hours)", e.ScheduleCron, err))
	}
	if e.Retention < 1 {
		errs = append(errs, fmt.Errorf("--etcd-snapshot-retention %d: want 1 or more snapshots kept", e.Retention))
	}
	return errors.Join(errs...)
}

func (r ClusterReset) validate() error {
	if r.RestorePath != "" && !r.Enabled {
		return fmt.Errorf("--cluster-reset-restore-path %s without --cluster-reset: add --cluster-reset to restore it", r.RestorePath)
	}
	return nil
}

// requireNoFsyncQuota checks --no-fsync-quota-backend-bytes: 0 or the
// durable quota's range, for an embedded no-fsync etcd of the k1m build.
func (s *Server) requireNoFsyncQuota() error {
	q := s.NoFsyncQuotaBytes
	switch {
	case q == 0:
		return nil
	case !flavor.SeparateNoFsyncStore:
		return fmt.Errorf("--no-fsync-quota-backend-bytes %d: the stock build keeps Events and Leases in the durable etcd (--etcd-quota-backend-bytes)", q)
	case s.Datastore.NoFsyncEndpoint != "":
		return fmt.Errorf("--no-fsync-quota-backend-bytes %d with --no-fsync-datastore-endpoint: the external etcd's quota is its own (its --quota-backend-bytes)", q)
	case q < MinEtcdQuotaBytes || q > MaxEtcdQuotaBytes:
		return fmt.Errorf("--no-fsync-quota-backend-bytes %d: want from %d (16 MiB) to %d (64 GiB), or 0 for the default %d (8 GiB)", q, MinEtcdQuotaBytes, MaxEtcdQuotaBytes, int64(constants.EtcdDefaultQuotaBytes))
	}
	return nil
}

func requireEtcdQuota(quota int64) error {
	if quota < MinEtcdQuotaBytes || quota > MaxEtcdQuotaBytes {
		return fmt.Errorf("--etcd-quota-backend-bytes %d: want from %d (16 MiB) to %d (64 GiB); the default is %d (8 GiB)", quota, MinEtcdQuotaBytes, MaxEtcdQuotaBytes, int64(constants.EtcdDefaultQuotaBytes))
	}
	return nil
}
