package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"k1m.dev/k1m/pkg/testutil"
)

// smallFS mounts a tmpfs of the given size: a file system that fills up.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mounting a %s tmpfs needs root: %v", size, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fill leaves about leave bytes free on the file system of dir.
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	free, err := freeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, free-leave); err != nil {
		t.Fatal(err)
	}
	return path
}

// writer puts keys until stopped, remembering those etcd acknowledged and
// counting refusals.
type writer struct {
	mu      sync.Mutex
	acked   map[string]string
	refused int
	lastErr error
}

func (w *writer) run(ctx context.Context, cli *clientv3.Client) {
	for i := 0; ctx.Err() == nil; i++ {
		key, value := fmt.Sprintf("/registry/w/%06d", i), fmt.Sprintf("value-%d", i)
		_, err := cli.Put(ctx, key, value)
		w.mu.Lock()
		if err == nil {
			w.acked[key] = value
		} else if ctx.Err() == nil {
			w.refused++
			w.lastErr = err
		}
		w.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *writer) counts() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), w.refused
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// TestDiskFullRefusesWritesAndRecovers runs a member on a 256 MiB file
// system while a client writes, fills the file system to under the
// reserve, and checks that writes are refused with a named report (etcd
// does not exit), that a start on the full disk is refused naming the
// directory, and that once space is freed writes resume with every
// acknowledged one kept.
func TestDiskFullRefusesWritesAndRecovers(t *testing.T) {
	fs := smallFS(t, "256M")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const reserve = 64 << 20
	serverTLS, clientTLS := certs(t, t.TempDir())
	m := Member{Name: "durable", DataDir: filepath.Join(fs, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS, DiskReserveBytes: reserve}
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	var reports []string
	var reportsMu sync.Mutex
	report := func(s string) { reportsMu.Lock(); reports = append(reports, s); reportsMu.Unlock() }
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go r.WatchDisk(watchCtx, 50*time.Millisecond, report)

	w := &writer{acked: map[string]string{}}
	writeCtx, stopWriting := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.run(writeCtx, client(t, m, clientTLS)); close(done) }()
	waitFor(t, "first writes", func() bool { n, _ := w.counts(); return n >= 20 })

	filler := fill(t, fs, reserve/2)
	waitFor(t, "writes refused", func() bool { _, n := w.counts(); return n >= 5 })
	if !r.alarms()[pb.AlarmType_NOSPACE] {
		t.Fatal("disk under its reserve, and no NOSPACE alarm")
	}
	if w.lastErr == nil || !strings.Contains(w.lastErr.Error(), "database space exceeded") {
		t.Errorf("write refused with %v, want etcd's database space exceeded", w.lastErr)
	}
	reportsMu.Lock()
	wantReport := fmt.Sprintf("writes are refused: %v: etcd durable: the file system of %s has ", ErrDiskLow, m.DataDir)
	if len(reports) != 1 || !strings.HasPrefix(reports[0], wantReport) || !strings.HasSuffix(reports[0], " free, under the 64.0 MiB etcd keeps in reserve: free space there (writes resume, nothing acknowledged is lost)") {
		t.Errorf("reported %q, want one report %q...", reports, wantReport)
	}
	reportsMu.Unlock()

	// A start on this disk is refused before etcd writes anything.
	other := Member{Name: "other", DataDir: filepath.Join(fs, "other"), Host: "::1", Port: freePortPair(t), TLS: serverTLS, DiskReserveBytes: reserve}
	if _, err := Start(ctx, other); !errors.Is(err, ErrDiskLow) || !strings.Contains(err.Error(), other.DataDir) {
		t.Errorf("start on a full disk: %v, want ErrDiskLow naming %s", err, other.DataDir)
	}
	if _, err := os.Stat(other.DataDir); !os.IsNotExist(err) {
		t.Errorf("start on a full disk left %s behind (%v)", other.DataDir, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ackedBefore, _ := w.counts()
	waitFor(t, "writes to resume", func() bool { n, _ := w.counts(); return n >= ackedBefore+20 })
	stopWriting()
	<-done
	if r.alarms()[pb.AlarmType_NOSPACE] {
		t.Error("NOSPACE still armed once space was freed")
	}
	reportsMu.Lock()
	if len(reports) != 2 || !strings.HasPrefix(reports[1], "etcd durable was out of space (NOSPACE alarm); disarmed: ") {
		t.Errorf("reported %q, want the disarm second", reports)
	}
	reportsMu.Unlock()

	got, err := client(t, m, clientTLS).Get(ctx, "/registry/w/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, kv := range got.Kvs {
		stored[string(kv.Key)] = string(kv.Value)
	}
	for k, v := range w.acked {
		if stored[k] != v {
			t.Errorf("acknowledged %s=%s, stored %q", k, v, stored[k])
		}
	}
	t.Logf("%d writes acknowledged, %d refused while the disk was full, all kept", len(w.acked), w.refused)
}
