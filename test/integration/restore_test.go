package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/testutil"
)

// leaseBackoff is the kubelet's longest wait between attempts to create
// its Lease (component-helpers' lease controller, maxBackoff): after a
// restart a Lease is back within the larger of it and one renew interval.
const leaseBackoff = 7 * time.Second

func (c *cluster) serverData() string { return filepath.Join(c.dataRoot, "server") }

// runServer runs the stopped server in the foreground with extra flags
// and returns what it printed and whether it exited 0.
func (c *cluster) runServer(t *testing.T, flags ...string) (string, error) {
	var out bytes.Buffer
	err := c.harness(t).RunServer(context.Background(), &out, flags...)
	return out.String(), err
}

// resetServer runs the stopped server once with --cluster-reset,
// restoring snapshot, and returns what it printed and whether it exited 0.
func (c *cluster) resetServer(t *testing.T, snapshot string) (string, error) {
	var out bytes.Buffer
	err := c.harness(t).ResetServer(context.Background(), &out, snapshot)
	return out.String(), err
}

// stopServerCleanly stops the server with SIGTERM and wants its log to end
// with a clean stop (kube-apiserver drained before the etcds stopped).
func stopServerCleanly(t *testing.T, c *cluster) {
	t.Helper()
	start := time.Now()
	must(t, "stop-server", c.harness(t).StopServer(context.Background(), 1))
	data, _ := os.ReadFile(filepath.Join(c.clusterDir, "server.log"))
	// k1m's own lines from the last stop on; the components' log lines
	// (klog's, starting with a level letter) may come in between.
	log := string(data)
	stopping := strings.LastIndex(log, "k1m server: stopping")
	if stopping < 0 {
		t.Fatal("the server did not log its stop after SIGTERM")
	}
	var own []string
	for _, line := range strings.Split(log[stopping:], "\n") {
		if strings.HasPrefix(line, "k1m server: ") {
			own = append(own, line)
		}
	}
	want := []string{"k1m server: stopping: waiting for kube-apiserver to drain and the controller-manager and scheduler to stop, then the etcds stop", "k1m server: stopped cleanly"}
	if !reflect.DeepEqual(own, want) {
		t.Fatalf("server's own log lines after SIGTERM: %q, want %q", own, want)
	}
	t.Logf("server stopped cleanly in %s", time.Since(start).Round(time.Second))
}

// startServer starts the stopped server and returns when kube-apiserver is
// ready.
func startServer(ctx context.Context, t *testing.T, c *cluster) time.Time {
	t.Helper()
	must(t, "start-server", c.harness(t).StartServer(ctx, 1))
	return waitAPIServerReady(ctx, t, c)
}

// waitAPIServerReady returns when kube-apiserver's /readyz says OK.
func waitAPIServerReady(ctx context.Context, t *testing.T, c *cluster) time.Time {
	t.Helper()
	var ready time.Time
	testutil.Eventually(t, 3*time.Minute, "kube-apiserver ready after the start", func() error {
		if err := poll.APIServerReady(ctx, c.client.CoreV1().RESTClient()); err != nil {
			return err
		}
		ready = time.Now()
		return nil
	})
	return ready
}

// waitLeasesBack wants every node Ready with a Lease renewed since ready
// within one renew interval (or the kubelet's create backoff, if longer),
// and no node NotReady for a lease duration after that.
func waitLeasesBack(ctx context.Context, t *testing.T, c *cluster, ready time.Time) {
	t.Helper()
	flaps := watchNotReady(ctx, t, c.client)
	within := max(renewInterval, leaseBackoff) + 2*time.Second
	for {
		err := nodesRenewedAndReady(ctx, c.client, ready)
		if err == nil {
			t.Logf("every node Lease back %s after kube-apiserver was ready", time.Since(ready).Round(100*time.Millisecond))
			break
		}
		if time.Since(ready) > within {
			t.Fatalf("not every node Lease back within %s of kube-apiserver being ready: %v", within, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(leaseDuration)
	if got := flaps.stop(); len(got) > 0 {
		t.Errorf("nodes went NotReady after the restart: %v", got)
	}
}

// testNoFsyncStoreDisposable damages the no-fsync etcd's files while the
// server is stopped, as a power loss may: the server must start anyway
// (it discards them) and every node Lease must come back unaided.
func testNoFsyncStoreDisposable(ctx context.Context, t *testing.T, c *cluster) {
	stopServerCleanly(t, c)
	dir := filepath.Join(c.serverData(), "etcd-nofsync", "member")
	damaged := 0
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			// Garbage over the start of every WAL segment and the database.
			if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
				f.WriteAt([]byte(strings.Repeat("\xde\xad", 2048)), 0)
				f.Close()
				damaged++
			}
		}
		return nil
	})
	if damaged == 0 {
		t.Fatalf("no file of the no-fsync etcd under %s to damage", dir)
	}
	t.Logf("damaged %d files of the no-fsync etcd", damaged)
	ready := startServer(ctx, t, c)
	waitLeasesBack(ctx, t, c, ready)
}

var savedSnapshot = regexp.MustCompile(`^snapshot (\S+) saved: (\S+), `)

// testSnapshotRestore saves a snapshot, changes the cluster, refuses a
// truncated copy of the snapshot without touching anything, restores the
// snapshot, and checks the cluster is as it was when the snapshot was
// taken and its nodes are Ready.
func testSnapshotRestore(ctx context.Context, t *testing.T, c *cluster) {
	cms := c.client.CoreV1().ConfigMaps(testNamespace)
	for i := 0; i < 3; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("snap-keep-%d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(c.k1m, "etcd-snapshot", "save", "--data-dir", c.serverData(), "--name", "before-change").CombinedOutput()
	m := savedSnapshot.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Fatalf("etcd-snapshot save: %v\n%s", err, out)
	}
	snapshot := filepath.Join(m[2], m[1])
	t.Logf("%s", strings.TrimSpace(string(out)))
	if out, err := exec.Command(c.k1m, "etcd-snapshot", "ls", "--data-dir", c.serverData()).CombinedOutput(); err != nil || !strings.Contains(string(out), "\n"+m[1]+" ") {
		t.Fatalf("etcd-snapshot ls does not list %s: %v\n%s", m[1], err, out)
	}
	// The change the restore must undo.
	for i := 0; i < 3; i++ {
		if err := cms.Delete(ctx, fmt.Sprintf("snap-keep-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "snap-after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(c.dataRoot, "truncated.db")
	os.WriteFile(truncated, data[:len(data)/2], 0o600)

	stopServerCleanly(t, c)
	etcdDir := filepath.Join(c.serverData(), "etcd")
	before := fileTree(etcdDir)
	out2, err := c.resetServer(t, truncated)
	want := "--cluster-reset-restore-path: snapshot " + truncated + " is truncated or not an etcd snapshot"
	if err == nil || !strings.Contains(out2, want) || !strings.Contains(out2, "(nothing was changed)") {
		t.Fatalf("restore of a truncated snapshot: %v, want a refusal with %q:\n%s", err, want, out2)
	}
	if after := fileTree(etcdDir); !reflect.DeepEqual(before, after) {
		t.Fatalf("the refused restore changed %s", etcdDir)
	}
	if out2, err := c.resetServer(t, snapshot); err != nil || !strings.Contains(out2, "cluster reset done (restored from "+snapshot+")") {
		t.Fatalf("restore: %v\n%s", err, out2)
	}
	// Left in a unit file, --cluster-reset must not throw away what was
	// written since by resetting again at the next start.
	if out2, err := c.resetServer(t, snapshot); err == nil || !strings.Contains(out2, "this server was reset already (restored from "+snapshot) {
		t.Fatalf("a second reset: %v, want a refusal\n%s", err, out2)
	}
	ready := startServer(ctx, t, c)
	for i := 0; i < 3; i++ {
		if _, err := cms.Get(ctx, fmt.Sprintf("snap-keep-%d", i), metav1.GetOptions{}); err != nil {
			t.Errorf("snap-keep-%d after the restore: %v", i, err)
		}
	}
	if _, err := cms.Get(ctx, "snap-after", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("snap-after, written after the snapshot, exists after the restore: %v", err)
	}
	waitLeasesBack(ctx, t, c, ready)
	// The cluster serves writes after the restore.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "snap-restored"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("write after the restore: %v", err)
	}
}

// fileTree maps every file under dir to its size, mode and modification time.
func fileTree(dir string) map[string]string {
	out := map[string]string{}
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil {
			out[path] = fmt.Sprintf("%d %s %s", info.Size(), info.Mode(), info.ModTime())
		}
		return nil
	})
	return out
}
