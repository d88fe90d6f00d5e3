package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestNoSpaceRecovers fills a member with a small quota until etcd raises
// NOSPACE and refuses writes, frees the data, and checks that the start
// housekeeping makes it writable again; while the data is still there it
// must refuse to start with the fix named.
func TestNoSpaceRecovers(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const quota = 4 << 20
	port := freePortPair(t)
	r, clientTLS := startMember(ctx, t, dir, port, quota)
	cli := client(t, r.Member, clientTLS)
	value := strings.Repeat("x", 64<<10)
	var full error
	for i := 0; i < 200 && full == nil; i++ {
		_, full = cli.Put(ctx, fmt.Sprintf("/registry/big/%03d", i), value)
	}
	if full == nil || !strings.Contains(full.Error(), "database space exceeded") {
		t.Fatalf("writes past the quota: %v, want database space exceeded", full)
	}
	if !r.alarms()[pb.AlarmType_NOSPACE] {
		t.Fatal("no NOSPACE alarm raised")
	}
	// With the data still in use, start housekeeping refuses, naming the fix.
	err := r.HousekeepAtStart(ctx, func(string) {})
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "raise --etcd-quota-backend-bytes") {
		t.Fatalf("HousekeepAtStart with a full store: %v", err)
	}
	// Deletes are allowed under NOSPACE; then a restart's housekeeping
	// compacts, defragments and disarms.
	if _, err := cli.Delete(ctx, "/registry/big/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	var said []string
	if err := r.HousekeepAtStart(ctx, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "defragmented and disarmed") {
		t.Errorf("reported %q", said)
	}
	if r.alarms()[pb.AlarmType_NOSPACE] {
		t.Error("NOSPACE still armed")
	}
	if _, err := cli.Put(ctx, "/registry/after", "y"); err != nil {
		t.Errorf("write after recovery: %v", err)
	}
	r.Stop()
}

func TestWorthDefrag(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		u    usage
		want bool
	}{
		{usage{size: 10 * mb, inUse: 1 * mb}, false},   // small file: not worth a pause
		{usage{size: 100 * mb, inUse: 40 * mb}, true},  // over half free
		{usage{size: 100 * mb, inUse: 60 * mb}, false}, // under half free
		{usage{size: 1000 * mb, inUse: 800 * mb}, true},
	} {
		if got := tc.u.worthDefrag(); got != tc.want {
			t.Errorf("%v: worthDefrag %v, want %v", tc.u, got, tc.want)
		}
	}
}
