package etcd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"k1m.dev/k1m/pkg/fsutil"
)

// Snapshot name prefixes: k3s's, so that its habits carry over. Prune
// removes only snapshots of one prefix, so scheduled snapshots never push
// out the ones an operator took by hand, nor the other way round.
const (
	OnDemandPrefix  = "on-demand"
	ScheduledPrefix = "etcd-snapshot"
)

// restoreRevisionBump is added to the restored store's revision, and the
// new revision marked compacted, so that every watcher (kubelets,
// controllers, kube-apiserver's watch cache) sees its resource version as
// too old and lists again instead of missing what changed since the
// snapshot. The figure is the one the Kubernetes docs give for
// etcdutl --bump-revision: far above any revision a cluster writes between
// a snapshot and its restore.
const restoreRevisionBump = 1_000_000_000

const metadataSuffix = ".json"

// SnapshotInfo is what k1m records about a snapshot, in NAME.json beside
// the snapshot file NAME.
type SnapshotInfo struct {
	Name       string    `json:"name"`
	Node       string    `json:"node"`
	CreatedAt  time.Time `json:"createdAt"`
	K1mVersion string    `json:"k1mVersion"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	Revision   int64     `json:"revision"`
	Keys       int       `json:"keys"`
	// Partitions are the store partitions' snapshots taken with the
	// durable etcd's, each in NAME.partition-PARTITION: restored together
	// or not at all.
	Partitions []PartitionSnapshot `json:"partitions,omitempty"`
}

// PartitionSnapshot is one partition's part of a snapshot.
type PartitionSnapshot struct {
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Revision int64  `json:"revision"`
	Keys     int    `json:"keys"`
}

// partitionFileInfix joins a snapshot's name and a partition's in the
// file of the partition's part.
const partitionFileInfix = ".partition-"

// PartitionFile is the file of the partition's part of the snapshot at
// path.
func PartitionFile(path, partition string) string { return path + partitionFileInfix + partition }

// SnapshotSources are the stores a snapshot covers: the durable etcd's
// member at Durable and a member of each partition.
type SnapshotSources struct {
	Durable    string
	Partitions []PartitionSource
}

// PartitionSource is where a snapshot reads a partition.
type PartitionSource struct{ Name, Endpoint string }

// Snapshots is a directory of snapshot files.
type Snapshots struct{ Dir string }

var snapshotPrefix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// CheckSnapshotPrefix refuses a name prefix that could not be a file name
// of its own or would make prefixes ambiguous to read.
func CheckSnapshotPrefix(prefix string) error {
	if !snapshotPrefix.MatchString(prefix) {
		return fmt.Errorf("snapshot name %q: want lower-case letters, digits and '-', at most 40, starting and ending with a letter or digit, e.g. %s", prefix, OnDemandPrefix)
	}
	return nil
}

// SnapshotName is PREFIX-NODE-UNIXTIME, as k3s names them.
func SnapshotName(prefix, node string, at time.Time) string {
	return fmt.Sprintf("%s-%s-%d", prefix, node, at.Unix())
}

// Save takes a snapshot of every partition in src and of the durable
// etcd, one after another (each consistent in itself, as kube-apiserver's
// writes to two resources never are one transaction), writes them to the
// directory with their checksums, revisions and the k1m version, and
// returns what it recorded. The snapshot is there whole or not at all:
// NAME.json, which lists the parts, is written last, and a failure
// removes what was written.
func (s Snapshots) Save(ctx context.Context, src SnapshotSources, tls TLS, name, node, version string, now time.Time) (SnapshotInfo, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return SnapshotInfo{}, err
	}
	path := filepath.Join(s.Dir, name)
	if _, err := os.Lstat(path); err == nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot %s exists already", path)
	}
	// The partitions' parts first, NAME (which List shows) after them:
	// a crash on the way leaves no NAME that lacks a part.
	var parts []PartitionSnapshot
	for _, p := range src.Partitions {
		part, err := saveDescribed(ctx, p.Endpoint, tls, PartitionFile(path, p.Name))
		if err != nil {
			removeSnapshotFiles(path)
			return SnapshotInfo{}, fmt.Errorf("the %s partition: %w", p.Name, err)
		}
		parts = append(parts, PartitionSnapshot{Name: p.Name, Size: part.Size, SHA256: part.SHA256, Revision: part.Revision, Keys: part.Keys})
	}
	info, err := saveDescribed(ctx, src.Durable, tls, path)
	if err != nil {
		removeSnapshotFiles(path)
		return SnapshotInfo{}, err
	}
	info.Partitions = parts
	info.Name, info.Node, info.CreatedAt, info.K1mVersion = name, node, now.UTC(), version
	data, err := json.MarshalIndent(info, "", "  ")
	if err == nil {
		err = fsutil.WriteFile(path+metadataSuffix, append(data, '\n'), 0o600)
	}
	if err != nil {
		removeSnapshotFiles(path)
		return SnapshotInfo{}, err
	}
	return info, nil
}

// saveDescribed saves the member at endpoint to path and describes it.
func saveDescribed(ctx context.Context, endpoint string, tls TLS, path string) (SnapshotInfo, error) {
	if err := saveSnapshot(ctx, endpoint, tls, path); err != nil {
		return SnapshotInfo{}, err
	}
	info, err := describe(path)
	if err != nil {
		os.Remove(path)
		return SnapshotInfo{}, err
	}
	return info, nil
}

// removeSnapshotFiles removes the snapshot at path and its partitions'
// parts.
func removeSnapshotFiles(path string) {
	os.Remove(path)
	parts, _ := filepath.Glob(globEscape(path) + partitionFileInfix + "*")
	for _, p := range parts {
		os.Remove(p)
	}
}

// globEscape escapes filepath.Match's metacharacters in a literal path.
func globEscape(path string) string {
	var b strings.Builder
	for _, r := range path {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteRune('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// describe reads a snapshot file's size, checksum, revision and key count.
func describe(path string) (SnapshotInfo, error) {
	size, sum, err := fileSHA256(path)
	if err != nil {
		return SnapshotInfo{}, err
	}
	status, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return SnapshotInfo{Size: size, SHA256: sum, Revision: status.Revision, Keys: status.TotalKey}, nil
}

func fileSHA256(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// List returns the snapshots in the directory, oldest first. A snapshot
// file without its NAME.json (copied in by hand) is listed with what its
// file tells: name, size and modification time.
func (s Snapshots) List() ([]SnapshotInfo, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SnapshotInfo
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasSuffix(name, metadataSuffix) || strings.HasSuffix(name, ".part") || strings.HasPrefix(name, ".") || strings.Contains(name, partitionFileInfix) {
			continue
		}
		info, err := s.info(name)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func (s Snapshots) info(name string) (SnapshotInfo, error) {
	path := filepath.Join(s.Dir, name)
	if data, err := os.ReadFile(path + metadataSuffix); err == nil {
		var info SnapshotInfo
		if err := json.Unmarshal(data, &info); err != nil {
			return SnapshotInfo{}, fmt.Errorf("%s%s: %w", path, metadataSuffix, err)
		}
		return info, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return SnapshotInfo{Name: name, Size: st.Size(), CreatedAt: st.ModTime().UTC()}, nil
}

// Delete removes the named snapshot and its record.
func (s Snapshots) Delete(name string) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("snapshot name %q: want the name of a file in %s, as ls prints it", name, s.Dir)
	}
	path := filepath.Join(s.Dir, name)
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no snapshot %s in %s", name, s.Dir)
		}
		return err
	}
	removeSnapshotFiles(path)
	if err := os.Remove(path + metadataSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Prune deletes the oldest snapshots named PREFIX-... until retain are
// left, and returns the names it deleted. Oldest is by the etcd revision
// each holds (a restore only moves revisions forward), then by creation
// time: a clock set forward once and back would otherwise make the
// snapshots taken after it look older than the one taken at the wrong
// time, and prune every one of them at once. A snapshot without k1m's
// record (copied in by hand) is read for its revision.
func (s Snapshots) Prune(prefix string, retain int) ([]string, error) {
	if retain < 1 {
		return nil, fmt.Errorf("retention %d: want at least 1 snapshot kept", retain)
	}
	all, err := s.List()
	if err != nil {
		return nil, err
	}
	var mine []SnapshotInfo
	for _, info := range all {
		if !strings.HasPrefix(info.Name, prefix+"-") {
			continue
		}
		if info.Revision == 0 {
			if read, err := describe(filepath.Join(s.Dir, info.Name)); err == nil {
				info.Revision = read.Revision
			}
		}
		mine = append(mine, info)
	}
	sort.SliceStable(mine, func(i, j int) bool {
		if mine[i].Revision != mine[j].Revision {
			return mine[i].Revision < mine[j].Revision
		}
		return mine[i].CreatedAt.Before(mine[j].CreatedAt)
	})
	var deleted []string
	for len(mine) > retain {
		if err := s.Delete(mine[0].Name); err != nil {
			return deleted, err
		}
		deleted = append(deleted, mine[0].Name)
		mine = mine[1:]
	}
	return deleted, nil
}

// VerifySnapshot checks a snapshot file before anything is restored from
// it: the checksum etcd appends to every snapshot, and when k1m's record
// NAME.json is beside it, the size and SHA-256 recorded there, of the
// file and of each partition's part.
func VerifySnapshot(path string) error {
	info, recorded, err := readRecord(path)
	if err != nil {
		return err
	}
	if !recorded {
		return verifyFile(path, nil)
	}
	if err := verifyFile(path, &info); err != nil {
		return err
	}
	for _, p := range info.Partitions {
		if err := verifyFile(PartitionFile(path, p.Name), &SnapshotInfo{Size: p.Size, SHA256: p.SHA256}); err != nil {
			return fmt.Errorf("the %s partition's part: %w", p.Name, err)
		}
	}
	return nil
}

// readRecord reads NAME.json beside the snapshot at path, if there.
func readRecord(path string) (SnapshotInfo, bool, error) {
	data, err := os.ReadFile(path + metadataSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return SnapshotInfo{}, false, nil
	}
	if err != nil {
		return SnapshotInfo{}, false, err
	}
	var info SnapshotInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return SnapshotInfo{}, false, fmt.Errorf("snapshot record %s%s: %w", path, metadataSuffix, err)
	}
	return info, true, nil
}

// verifyFile checks one snapshot file against etcd's checksum and, when
// given, the size and SHA-256 recorded for it.
func verifyFile(path string, want *SnapshotInfo) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("snapshot %s is not a regular file", path)
	}
	if want != nil {
		size, sum, err := fileSHA256(path)
		if err != nil {
			return err
		}
		if size != want.Size || sum != want.SHA256 {
			return fmt.Errorf("snapshot %s is damaged: %d bytes with SHA-256 %s, but its record recorded %d bytes with SHA-256 %s", path, size, sum, want.Size, want.SHA256)
		}
	}
	return checkEmbeddedHash(path, st.Size())
}

// checkEmbeddedHash checks the SHA-256 of the database that etcd appends to
// a snapshot it streams (the database is a multiple of 512 bytes, so a
// snapshot is 32 bytes over one).
func checkEmbeddedHash(path string, size int64) error {
	if size < 512+sha256.Size || size%512 != sha256.Size {
		return fmt.Errorf("snapshot %s is truncated or not an etcd snapshot: %d bytes is not a database of 512-byte pages followed by etcd's 32-byte SHA-256", path, size)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-sha256.Size); err != nil {
		return err
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("snapshot %s is corrupt: the SHA-256 etcd appended does not match its contents", path)
	}
	return nil
}

// Restore replaces the member's data directory with one restored from the
// snapshot at path, and each partition member's with the snapshot's part
// for its partition. The snapshot's partitions must be the members'.
// Nothing changes unless the snapshot verifies and every restore
// completes: each is restored beside its data directory first, then all
// are moved into place; the old directories are kept, renamed, and
// returned.
func Restore(path string, m Member, partitions []Member) (kept []string, err error) {
	if err := VerifySnapshot(path); err != nil {
		return nil, err
	}
	info, _, err := readRecord(path)
	if err != nil {
		return nil, err
	}
	if err := requireSameParts(info.Partitions, partitions); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	type staged struct {
		m       Member
		staging string
	}
	var all []staged
	cleanup := func() {
		for _, st := range all {
			os.RemoveAll(st.staging)
		}
	}
	for i, member := range append([]Member{m}, partitions...) {
		from := path
		if i > 0 {
			from = PartitionFile(path, member.Partition)
		}
		st := staged{m: member, staging: member.DataDir + ".restoring"}
		all = append(all, st)
		if err := os.RemoveAll(st.staging); err != nil {
			cleanup()
			return nil, err
		}
		if err := restoreRaised(from, member, st.staging, restoreRevisionBump); err != nil {
			cleanup()
			return nil, err
		}
	}
	suffix := fmt.Sprintf(".before-restore-%d", time.Now().Unix())
	var moved []staged
	for _, st := range all {
		k, err := swapIn(st.staging, st.m.DataDir, st.m.DataDir+suffix)
		if err != nil {
			// Put back what was moved: the stores stay as they were.
			for _, done := range moved {
				os.RemoveAll(done.m.DataDir)
				os.Rename(done.m.DataDir+suffix, done.m.DataDir)
			}
			cleanup()
			return nil, err
		}
		moved = append(moved, st)
		if k != "" {
			kept = append(kept, k)
		}
	}
	return kept, nil
}

// requireSameParts wants the snapshot's partitions to be the members'.
func requireSameParts(parts []PartitionSnapshot, members []Member) error {
	var have, want []string
	for _, p := range parts {
		have = append(have, p.Name)
	}
	for _, m := range members {
		want = append(want, m.Partition)
	}
	if !slices.Equal(have, want) {
		return fmt.Errorf("it holds the partitions %s, the server has %s: restore it on a server started with --etcd-partitions=%s",
			describeNames(have), describeNames(want), strings.Join(have, ","))
	}
	return nil
}

func describeNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// swapIn moves staging to dir, keeping what was at dir as kept ("": dir
// was not there).
func swapIn(staging, dir, kept string) (string, error) {
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, kept); err != nil {
			return "", err
		}
	} else {
		kept = ""
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(staging, dir); err != nil {
		if kept != "" {
			os.Rename(kept, dir)
		}
		return "", err
	}
	return kept, nil
}

// saveSnapshot saves the store of the member at endpoint to path (written
// to PATH.part and renamed into place only when complete).
func saveSnapshot(ctx context.Context, endpoint string, tls TLS, path string) error {
	tlsCfg, err := transport.TLSInfo{CertFile: tls.CertFile, KeyFile: tls.KeyFile, TrustedCAFile: tls.CAFile}.ClientConfig()
	if err != nil {
		return fmt.Errorf("etcd client certificate: %w", err)
	}
	cfg := clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: 10 * time.Second}
	if err := clientsnapshot.Save(ctx, zap.NewNop(), cfg, path); err != nil {
		return fmt.Errorf("snapshot of etcd at %s: %w", endpoint, err)
	}
	return nil
}

// restoreRaised restores the snapshot at path into dir as m's data, the
// only member of a new cluster, its revision raised by bump and marked
// compacted below that: watchers resuming at an older revision are told
// to list again.
func restoreRaised(path string, m Member, dir string, bump uint64) error {
	cfg, err := config(m)
	if err != nil {
		return err
	}
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        path,
		Name:                m.Name,
		OutputDataDir:       dir,
		PeerURLs:            []string{cfg.AdvertisePeerUrls[0].String()},
		InitialCluster:      cfg.InitialCluster,
		InitialClusterToken: cfg.InitialClusterToken,
		RevisionBump:        bump,
		MarkCompacted:       true,
	})
	if err != nil {
		return fmt.Errorf("restoring %s: %w", path, err)
	}
	return nil
}
