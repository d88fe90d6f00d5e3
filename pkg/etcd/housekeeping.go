package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/mvcc"
	"go.etcd.io/etcd/server/v3/mvcc/buckets"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrNoSpace is a member that raised its NOSPACE alarm and stays over its
// quota after compaction and defragmentation: it refuses every write.
var ErrNoSpace = errors.New("etcd is out of space (NOSPACE alarm)")

// ErrCorrupt is a member whose data failed etcd's consistency check.
var ErrCorrupt = errors.New("etcd data is corrupt (CORRUPT alarm)")

// usage is a member's database file size and the part of it in use.
type usage struct{ size, inUse, quota int64 }

func (r *Running) usage() usage {
	b := r.etcd.Server.Backend()
	return usage{size: b.Size(), inUse: b.SizeInUse(), quota: r.Member.quota()}
}

// freshUsage is usage once the pages a compaction freed count as free.
// etcd counts the pages in use when it begins a write transaction, from
// what bbolt knew when the last one ended; pages freed while a read was
// open stay pending until a later write transaction begins without it.
// Under NOSPACE no client write comes to commit one, so the count can
// stay as it was before the compaction until kube-apiserver's next
// compaction (5 minutes). A few empty commits settle it: each marks the
// meta bucket (which exists, so nothing changes) to make etcd commit.
func (r *Running) freshUsage() usage {
	b := r.etcd.Server.Backend()
	for i := 0; i < freshUsageCommits; i++ {
		tx := b.BatchTx()
		tx.LockOutsideApply()
		tx.UnsafeCreateBucket(buckets.Meta)
		tx.Unlock()
		b.ForceCommit()
		time.Sleep(freshUsageGap)
	}
	return r.usage()
}

// freshUsageCommits and freshUsageGap: a read open across one commit is
// done by the next, 20 ms later (etcd's reads take milliseconds).
const (
	freshUsageCommits = 3
	freshUsageGap     = 20 * time.Millisecond
)

func (u usage) String() string {
	return fmt.Sprintf("database %s, %s of it in use, quota %s", mib(u.size), mib(u.inUse), mib(u.quota))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// worthDefrag tells whether defragmentation would give back enough of the
// file to pay for the pause (writes wait while it runs): at least 128 MiB,
// or half of a file of 64 MiB or more.
func (u usage) worthDefrag() bool {
	free := u.size - u.inUse
	return free >= 128<<20 || (u.size >= 64<<20 && 2*free >= u.size)
}

// needsDefragToWrite tells whether the file itself is so close to the
// quota (90%) that etcd, which compares the file's size, would raise
// NOSPACE again at once.
func (u usage) needsDefragToWrite() bool { return u.size*10 >= u.quota*9 }

// roomAfterDefrag tells whether, once defragmented, the database sits far
// enough below its quota (under 90%) that disarming NOSPACE is not undone
// by the next few writes.
func (u usage) roomAfterDefrag() bool { return u.inUse*10 < u.quota*9 }

// alarms returns the cluster's active alarm types, whichever member
// raised them (etcd applies an alarm to every member: one member's NOSPACE
// refuses the whole cluster's writes).
func (r *Running) alarms() map[pb.AlarmType]bool {
	out := map[pb.AlarmType]bool{}
	for _, a := range r.etcd.Server.Alarms() {
		out[a.Alarm] = true
	}
	return out
}

// noSpaceAlarms sorts the cluster's NOSPACE alarms by the member that
// raised them: this one (own), another member of the cluster (live, by
// ID), or a member no longer in it (gone: removed, so nobody else will
// ever disarm it).
type noSpaceAlarms struct {
	own        bool
	live, gone []uint64
}

func (r *Running) noSpaceAlarms() noSpaceAlarms {
	var out noSpaceAlarms
	self := uint64(r.etcd.Server.ID())
	for _, a := range r.etcd.Server.Alarms() {
		switch {
		case a.Alarm != pb.AlarmType_NOSPACE:
		case a.MemberID == self:
			out.own = true
		case r.etcd.Server.Cluster().Member(types.ID(a.MemberID)) != nil:
			out.live = append(out.live, a.MemberID)
		default:
			out.gone = append(out.gone, a.MemberID)
		}
	}
	return out
}

// disarmGone disarms the NOSPACE alarms of members no longer in the
// cluster: their disks are not the cluster's any more, and no member would
// otherwise ever disarm them (each disarms its own). A disarm names the
// alarm's member ID: etcd removes only the alarm of the member named.
func (r *Running) disarmGone(ctx context.Context, gone []uint64, report func(string)) error {
	for _, id := range gone {
		if err := r.disarmNoSpace(ctx, id); err != nil {
			return fmt.Errorf("disarming the NOSPACE alarm of removed etcd member %x: %w", id, err)
		}
		report(fmt.Sprintf("%s: disarmed the NOSPACE alarm of etcd member %x, which is no longer in the cluster", r.Member.label(), id))
	}
	return nil
}

func (r *Running) disarmNoSpace(ctx context.Context, memberID uint64) error {
	_, err := r.etcd.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: memberID, Alarm: pb.AlarmType_NOSPACE})
	return err
}

// waitingFor says which members' NOSPACE alarms still refuse writes.
func (r *Running) waitingFor(live []uint64) string {
	names := make([]string, 0, len(live))
	for _, id := range live {
		name := fmt.Sprintf("%x", id)
		if m := r.etcd.Server.Cluster().Member(types.ID(id)); m != nil && m.Name != "" {
			name = m.Name
		}
		names = append(names, name)
	}
	return fmt.Sprintf("%v: raised by etcd member %s, whose server disarms it once its disk has room (or remove that server: k1m server remove)", ErrNoSpace, strings.Join(names, ", "))
}

// HousekeepAtStart runs before any client writes: it refuses a CORRUPT
// member, recovers from NOSPACE when compaction and defragmentation make
// room (and says how to otherwise), and defragments a file that is mostly
// free pages. report is told what was done.
func (r *Running) HousekeepAtStart(ctx context.Context, report func(string)) error {
	alarms := r.alarms()
	if alarms[pb.AlarmType_CORRUPT] {
		return fmt.Errorf("%w in %s: restore it from a snapshot (k1m server --cluster-reset --cluster-reset-restore-path FILE)", ErrCorrupt, r.Member.DataDir)
	}
	noSpace := r.noSpaceAlarms()
	if err := r.disarmGone(ctx, noSpace.gone, report); err != nil {
		return err
	}
	if len(noSpace.live) > 0 {
		report(fmt.Sprintf("writes are refused: %s", r.waitingFor(noSpace.live)))
	}
	if noSpace.own {
		// Nothing has connected yet, so no reader needs old revisions:
		// compact everything up to now, then give the pages back.
		rev := r.etcd.Server.KV().Rev()
		if _, err := r.etcd.Server.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: true}); err != nil && !errors.Is(err, mvcc.ErrCompacted) {
			return fmt.Errorf("compacting etcd %s for its NOSPACE alarm: %w", r.Member.Name, err)
		}
		return r.recoverNoSpace(ctx, report)
	}
	if u := r.usage(); u.worthDefrag() {
		if err := r.etcd.Server.Backend().Defrag(); err != nil {
			return fmt.Errorf("defragmenting etcd %s: %w", r.Member.Name, err)
		}
		report(fmt.Sprintf("%s defragmented: %s, was %s", r.Member.label(), r.usage(), mib(u.size)))
	}
	return nil
}

// recoverNoSpace disarms this member's own NOSPACE alarm if its file system is
// over its reserve and the data in use (after compaction) leaves room under
// the quota, defragmenting first when that gives back enough and the disk
// has room for the copy; otherwise it returns ErrDiskLow or ErrNoSpace
// with the fix.
func (r *Running) recoverNoSpace(ctx context.Context, report func(string)) error {
	r.noSpace.Lock()
	defer r.noSpace.Unlock()
	if err := r.Member.checkDisk(); err != nil {
		return err
	}
	if u := r.usage(); !u.roomAfterDefrag() {
		if u = r.freshUsage(); !u.roomAfterDefrag() {
			return fmt.Errorf("%w: %s (%s) has over 90%% of its quota in use after compaction: %s", ErrNoSpace, r.Member.label(), u, r.noSpaceFix())
		}
	}
	did := "disarmed"
	if u := r.usage(); u.needsDefragToWrite() || u.worthDefrag() {
		// etcd's quota counts the file, not the pages in use.
		if !r.roomForDefrag(u) {
			return fmt.Errorf("%w: etcd %s (%s) must be defragmented before it takes writes, which needs %s free beside %s's reserve: free space there",
				ErrDiskLow, r.Member.Name, u, mib(u.inUse), r.Member.DataDir)
		}
		if err := r.etcd.Server.Backend().Defrag(); err != nil {
			return fmt.Errorf("defragmenting etcd %s for its NOSPACE alarm: %w", r.Member.Name, err)
		}
		did = "defragmented and disarmed"
	}
	u := r.usage()
	if err := r.disarmNoSpace(ctx, uint64(r.etcd.Server.ID())); err != nil {
		return fmt.Errorf("disarming etcd %s's NOSPACE alarm: %w", r.Member.Name, err)
	}
	r.diskArmed = false
	report(fmt.Sprintf("%s was out of space (NOSPACE alarm); %s: %s", r.Member.label(), did, u))
	return nil
}

// defragBeforeWrites defragments this member, which raised no alarm, when
// another member's NOSPACE holds the cluster's writes and this one's file
// is as full: its members fill together, and a member left full raises
// its own alarm at the first write after the others disarm theirs, which
// holds writes another alarm interval.
func (r *Running) defragBeforeWrites(report func(string)) {
	r.noSpace.Lock()
	defer r.noSpace.Unlock()
	u := r.usage()
	if !u.needsDefragToWrite() {
		return
	}
	if !u.roomAfterDefrag() {
		u = r.freshUsage()
	}
	if !u.roomAfterDefrag() || !r.roomForDefrag(u) {
		return
	}
	if err := r.etcd.Server.Backend().Defrag(); err != nil {
		report(fmt.Sprintf("defragmenting %s while another member's NOSPACE alarm holds writes: %v", r.Member.label(), err))
		return
	}
	report(fmt.Sprintf("%s defragmented while another member's NOSPACE alarm holds writes: %s", r.Member.label(), r.usage()))
}

// roomForDefrag tells whether the file system can take the copy that
// defragmentation writes (the pages in use) and still keep its reserve.
func (r *Running) roomForDefrag(u usage) bool {
	free, err := freeBytes(r.Member.DataDir)
	return err == nil && free-u.inUse >= r.Member.diskReserve()
}

// WatchAlarms checks the cluster's alarms every interval until ctx ends.
// kube-apiserver compacts on its own every 5 minutes, so on this member's
// NOSPACE this defragments and disarms once that made room; another
// member's NOSPACE is that member's to disarm (its disk, its quota),
// unless the member was removed: then this one disarms it. Until then,
// and for any other alarm, report is told every time, with the fix: a
// read-only cluster is never silent.
func (r *Running) WatchAlarms(ctx context.Context, interval time.Duration, report func(string)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) { r.checkAlarms(ctx, report) }, interval)
}

func (r *Running) checkAlarms(ctx context.Context, report func(string)) {
	alarms := r.alarms()
	if alarms[pb.AlarmType_CORRUPT] {
		report(fmt.Sprintf("%v in %s: %s", ErrCorrupt, r.Member.DataDir, r.corruptFix()))
	}
	if !alarms[pb.AlarmType_NOSPACE] {
		return
	}
	noSpace := r.noSpaceAlarms()
	if err := r.disarmGone(ctx, noSpace.gone, report); err != nil {
		report(fmt.Sprintf("writes are refused: %v", err))
	}
	if noSpace.own {
		if err := r.recoverNoSpace(ctx, report); err != nil {
			report(fmt.Sprintf("writes are refused: %v", err))
		}
	} else {
		r.defragBeforeWrites(report)
	}
	if len(noSpace.live) > 0 {
		report(fmt.Sprintf("writes are refused: %s", r.waitingFor(noSpace.live)))
	}
}

// noSpaceFix and corruptFix say what the operator does. The no-fsync
// member has no quota flag and no snapshot: the server empties it at its
// next start.
func (r *Running) noSpaceFix() string {
	if r.Member.NoFsync {
		return "restart the server, which starts its no-fsync etcd empty (raise --no-fsync-quota-backend-bytes first if its Events fill it again)"
	}
	if r.Member.Partition != "" {
		return "raise --etcd-partition-quota-backend-bytes and restart, then delete what filled it"
	}
	return "raise --etcd-quota-backend-bytes and restart, then delete what filled it"
}

func (r *Running) corruptFix() string {
	if r.Member.NoFsync {
		return "restart the server, which starts its no-fsync etcd empty"
	}
	return "stop the server and restore a snapshot (k1m server --cluster-reset --cluster-reset-restore-path FILE)"
}
