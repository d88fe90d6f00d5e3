package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/sys/unix"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrDiskLow is a member whose file system has less free space than the
// member keeps in reserve. etcd exits on a failed WAL or database write,
// which in a one-process server stops the whole control plane; so k1m
// raises the NOSPACE alarm itself before the disk is full: writes are
// refused (never acknowledged and then lost), reads keep working.
var ErrDiskLow = errors.New("etcd's file system is almost full")

// DefaultDiskReserveBytes is the free space a member's file system keeps:
// a new WAL segment preallocates 64 MiB, and refused writes still append
// to the WAL, so the reserve holds a few segments and the time it takes an
// operator to react.
const DefaultDiskReserveBytes = 512 << 20

// NoFsyncDiskReserveBytes is the no-fsync member's reserve: two WAL
// segments. Its store may sit on a small tmpfs, and a refusal there stops
// node heartbeats, so it keeps less; it is emptied at every start anyway.
const NoFsyncDiskReserveBytes = 128 << 20

func (m Member) diskReserve() int64 {
	switch {
	case m.DiskReserveBytes > 0:
		return m.DiskReserveBytes
	case m.NoFsync:
		return NoFsyncDiskReserveBytes
	}
	return DefaultDiskReserveBytes
}

// freeBytes is the space an unprivileged writer can still use on the file
// system holding path, or on that of its nearest existing parent.
func freeBytes(path string) (int64, error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), nil
		}
		if !errors.Is(err, os.ErrNotExist) || p == filepath.Dir(p) {
			return 0, fmt.Errorf("reading the free space of %s: %w", p, err)
		}
	}
}

// checkDisk returns ErrDiskLow, with the fix, when the member's file
// system is under its reserve.
func (m Member) checkDisk() error {
	free, err := freeBytes(m.DataDir)
	if err != nil {
		return err
	}
	if reserve := m.diskReserve(); free < reserve {
		return fmt.Errorf("%w: etcd %s: the file system of %s has %s free, under the %s etcd keeps in reserve: free space there (writes resume, nothing acknowledged is lost)",
			ErrDiskLow, m.Name, m.DataDir, mib(free), mib(reserve))
	}
	return nil
}

// WatchDisk checks the member's free space every interval until ctx ends.
// Under the reserve it raises NOSPACE, so that etcd refuses writes instead
// of exiting on a full disk; once space is freed it disarms (through
// recoverNoSpace, which also checks the quota). report is told each change.
func (r *Running) WatchDisk(ctx context.Context, interval time.Duration, report func(string)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) { r.guardDisk(ctx, report) }, interval)
}

func (r *Running) guardDisk(ctx context.Context, report func(string)) {
	r.noSpace.Lock()
	low := r.Member.checkDisk()
	// Only this member's own alarm: another member's may be disarmed by
	// that member at any time, leaving this full disk taking writes.
	armed := r.noSpaceAlarms().own
	if low != nil && !armed {
		err := r.raiseNoSpace(ctx)
		if err == nil {
			r.diskArmed = true
		}
		r.noSpace.Unlock()
		if err != nil {
			report(fmt.Sprintf("%v; raising NOSPACE failed: %v", low, err))
			return
		}
		report(fmt.Sprintf("writes are refused: %v", low))
		return
	}
	ours := armed && r.diskArmed
	r.noSpace.Unlock()
	// Disarm only with a margin over the reserve, so that a disk hovering
	// at the threshold does not flip writes on and off every check.
	if ours && r.Member.checkDiskWithMargin() == nil {
		if err := r.recoverNoSpace(ctx, report); err != nil {
			report(fmt.Sprintf("writes are refused: %v", err))
		}
	}
}

// diskMargin is how far over its reserve a file system must be before
// writes are accepted again.
const diskMargin = 64 << 20

func (m Member) checkDiskWithMargin() error {
	m.DiskReserveBytes = m.diskReserve() + diskMargin
	return m.checkDisk()
}

func (r *Running) raiseNoSpace(ctx context.Context) error {
	_, err := r.etcd.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: uint64(r.etcd.Server.ID()), Alarm: pb.AlarmType_NOSPACE})
	return err
}
