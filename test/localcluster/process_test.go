package localcluster

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/nodename"
	"k1m.dev/k1m/pkg/testutil"
)

func testNode(t *testing.T) Node {
	dir := t.TempDir()
	return Node{Role: Agent, Index: 1, Name: "k1m-node-1", PidFile: filepath.Join(dir, "n.pid"), LogFile: filepath.Join(dir, "n.log")}
}

// A background process: its pid in the pid file, its output in the log,
// none of the caller's K1M_TOKEN, the command's own; stopped by SIGTERM.
func TestStartBackgroundAndStop(t *testing.T) {
	t.Setenv("K1M_TOKEN", "the-callers")
	var out bytes.Buffer
	c := &Cluster{opts: Options{Out: &out}}
	n := testNode(t)
	cmd := Command{Args: []string{"sh", "-c", `echo "token=$K1M_TOKEN"; exec sleep 60`}, Env: []string{"K1M_TOKEN=the-nodes"}}
	if err := c.startBackground(n, cmd); err != nil {
		t.Fatal(err)
	}
	pid := runningPid(n.PidFile)
	if pid == 0 {
		t.Fatalf("no running process in %s", n.PidFile)
	}
	if want := "cluster: k1m agent k1m-node-1 started (pid " + strconv.Itoa(pid) + ", log " + n.LogFile + ")\n"; out.String() != want {
		t.Errorf("progress %q, want %q", out.String(), want)
	}
	waitFor(t, func() bool { data, _ := os.ReadFile(n.LogFile); return string(data) == "token=the-nodes\n" })
	start := time.Now()
	got, killed, err := stopPid(n.PidFile)
	if err != nil || got != pid || killed {
		t.Errorf("stopPid: pid %d, killed %t, %v; want %d stopped by SIGTERM", got, killed, err, pid)
	}
	if time.Since(start) > 5*time.Second || alive(pid) {
		t.Errorf("process %d alive %t %s after SIGTERM", pid, alive(pid), time.Since(start))
	}
	if _, err := os.Stat(n.PidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file left: %v", err)
	}
	if got, killed, err := stopPid(n.PidFile); got != 0 || killed || err != nil {
		t.Errorf("stopPid without a pid file: %d, %t, %v; want nothing done", got, killed, err)
	}
}

// A foreground run passes the exit code on and appends to the log.
func TestRunForeground(t *testing.T) {
	c := &Cluster{opts: Options{Out: &bytes.Buffer{}}}
	n := testNode(t)
	os.WriteFile(n.LogFile, []byte("before\n"), 0o644)
	var out bytes.Buffer
	err := c.runForeground(t.Context(), n, Command{Args: []string{"sh", "-c", "echo refused; echo why >&2; exit 3"}}, &out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("runForeground: %v, want exit status 3", err)
	}
	if out.String() != "refused\nwhy\n" {
		t.Errorf("output %q", out.String())
	}
	if log, _ := os.ReadFile(n.LogFile); string(log) != "before\nrefused\nwhy\n" {
		t.Errorf("log %q", log)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "the condition", func() error {
		if cond() {
			return nil
		}
		return errors.New("not met")
	})
}

func TestExited(t *testing.T) {
	n := testNode(t)
	n.Role, n.Name = Server, ""
	os.WriteFile(n.LogFile, []byte("1\n2\n3\n4\n5\n6\nk1m server: --cluster-init: unknown flag\n"), 0o644)
	cmd := exec.Command("true")
	cmd.Run()
	os.WriteFile(n.PidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	want := "k1m server exited; see " + n.LogFile + ":\n3\n4\n5\n6\nk1m server: --cluster-init: unknown flag"
	if err := exited(n); err == nil || err.Error() != want {
		t.Errorf("exited: %v\nwant %s", err, want)
	}
}

func TestStoppedMessage(t *testing.T) {
	for _, tc := range []struct {
		pid    int
		killed bool
		want   string
	}{
		{0, false, "k1m server was not running"},
		{42, false, "k1m server (pid 42) stopped"},
		{42, true, "k1m server (pid 42) stopped with SIGKILL: SIGTERM had not stopped it in 1m30s"},
	} {
		if got := stopped("k1m server", tc.pid, tc.killed); got != tc.want {
			t.Errorf("stopped(%d, %t) = %q, want %q", tc.pid, tc.killed, got, tc.want)
		}
	}
}

// The expected nodes are Ready, or missing (not Ready, or not
// registered), each named; a Ready node the plan does not name (the lone
// server's old node, left under the host's name when the data is reused
// by servers of several) is not counted, and is named.
func TestReadiness(t *testing.T) {
	out := "k1m-server-1 True\nk1m-node-1 False\nk1m-node-2 Unknown\nvm True\nk1m-server-2 True\n\n"
	got := readinessOf(out, []string{"k1m-server-1", "k1m-server-2", "k1m-server-3", "k1m-node-1", "k1m-node-2"})
	want := readiness{Ready: []string{"k1m-server-1", "k1m-server-2"}, Missing: []string{"k1m-server-3", "k1m-node-1", "k1m-node-2"}, Others: []string{"vm"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readinessOf:\n got %+v\nwant %+v", got, want)
	}
	wantText := "; not Ready: k1m-server-3, k1m-node-1, k1m-node-2; not counted, not in this cluster's plan: vm (left by an earlier cluster in this data: k1m kubectl delete node NAME)"
	if got.describe() != wantText {
		t.Errorf("describe:\n got %q\nwant %q", got.describe(), wantText)
	}
	all := readinessOf("a True\nb True\n", []string{"a", "b"})
	if want := (readiness{Ready: []string{"a", "b"}}); !reflect.DeepEqual(all, want) || all.describe() != "" {
		t.Errorf("all Ready: %+v %q, want %+v and no description", all, all.describe(), want)
	}
}

// Data a lone server made (its node named after the host) is refused at
// once by a layout of several servers, naming the command to run; data of
// the layout's own names, or none, passes.
func TestCheckDataLayout(t *testing.T) {
	root := t.TempDir()
	o := base(3, 5)
	o.DataRoot = root
	c := newCluster(t, o)
	if err := c.checkDataLayout(t.Context()); err != nil {
		t.Fatalf("empty data: %v", err)
	}
	if err := nodename.Record(c.Server(2).DataDir, "k1m-server-2"); err != nil {
		t.Fatal(err)
	}
	if err := c.checkDataLayout(t.Context()); err != nil {
		t.Errorf("data of this layout: %v", err)
	}
	if err := nodename.Record(c.Server(1).DataDir, "vm"); err != nil {
		t.Fatal(err)
	}
	want := "k1m server k1m-server-1: its data " + root + "/server was made for node vm, and SERVERS=3 names it k1m-server-1\n" +
		"the data under " + root + " is another layout's cluster: start it as it was made (the SERVERS it had), or start from empty data: make cluster-down, rm -rf " + root + ", then make cluster again"
	if err := c.checkDataLayout(t.Context()); err == nil || err.Error() != want {
		t.Errorf("a lone server's data:\n got %v\nwant %s", err, want)
	}
}

func TestListensOn(t *testing.T) {
	table := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:192B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:0929 0000000000000000FFFF00000100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
`
	for port, want := range map[int]bool{6443: true, 2345: false, 50000: false} {
		if got := listensOn(table, port); got != want {
			t.Errorf("listensOn(%d) = %t, want %t", port, got, want)
		}
	}
}

func TestInMemoryCgroup(t *testing.T) {
	v1 := "12:memory:/k1m-control-plane/k1m-server-2\n11:cpu,cpuacct:/\n0::/\n"
	v2 := "0::/k1m-control-plane/k1m-server-2\n"
	for _, tc := range []struct {
		proc string
		want bool
	}{{v1, true}, {v2, true}, {"12:memory:/\n0::/k1m-control-plane/k1m-server-3\n", false}, {"11:cpu:/k1m-control-plane/k1m-server-2\n", false}} {
		if got := inMemoryCgroup(tc.proc, "/k1m-control-plane/k1m-server-2"); got != tc.want {
			t.Errorf("inMemoryCgroup(%q) = %t, want %t", tc.proc, got, tc.want)
		}
	}
}

func TestHumanSize(t *testing.T) {
	var got []string
	for _, n := range []int64{512, 4096, 38 << 20, 1288490189} {
		got = append(got, humanSize(n))
	}
	if strings.Join(got, " ") != "512 4.0K 38M 1.2G" {
		t.Errorf("humanSize: %q", got)
	}
}

func TestLayoutRecorded(t *testing.T) {
	dir := t.TempDir()
	if _, _, ok := ReadLayout(dir); ok {
		t.Error("a layout read from an empty directory")
	}
	c := newCluster(t, Options{Servers: 3, Nodes: 5, ClusterDir: dir})
	if err := c.recordLayout(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s, n, ok := ReadLayout(dir); s != 3 || n != 5 || !ok {
		t.Errorf("ReadLayout = %d, %d, %t; want 3, 5, true", s, n, ok)
	}
	// The shell harness recorded only its nodes.
	os.Remove(filepath.Join(dir, "servers"))
	if s, n, ok := ReadLayout(dir); s != 1 || n != 5 || !ok {
		t.Errorf("ReadLayout of the shell harness's = %d, %d, %t; want 1, 5, true", s, n, ok)
	}
}

func TestPidFileLabel(t *testing.T) {
	var got []string
	// The plan's names, then those of a cluster of another layout.
	c := newCluster(t, base(3, 3))
	for _, f := range []string{"/c/server.pid", "/c/server-2.pid", "/other/server.pid", "/other/server-2.pid", "/other/k1m-node-3.pid"} {
		got = append(got, c.pidFileLabel(f))
	}
	want := []string{"k1m server k1m-server-1", "k1m server k1m-server-2", "k1m server", "k1m server k1m-server-2", "k1m agent k1m-node-3"}
	if !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
}

func TestSummary(t *testing.T) {
	var out bytes.Buffer
	o := base(3, 4)
	o.DataRoot = "/var/lib/k1m"
	c, _ := New(o)
	c.opts.Out = &out
	c.summary(t.Context())
	want := `
k1m cluster up: 4 node(s), 3 servers (k1m-server-1 https://[fddf:4035:b520::1:1]:6443, k1m-server-2 https://[fddf:4035:b520::1:2]:6443, k1m-server-3 https://[fddf:4035:b520::1:3]:6443).
  kubeconfig: /var/lib/k1m/server/admin.kubeconfig
  use it:     export KUBECONFIG=/var/lib/k1m/server/admin.kubeconfig; /k/k1m kubectl get nodes -o wide
              (or /k/k1m kubectl ..., which finds it by itself)
  logs:       /c/*.log
  stop:       make cluster-down
`
	if out.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	c = newCluster(t, base(1, 1))
	c.opts.Out = &out
	c.summary(t.Context())
	want = `
k1m cluster up: 1 node(s).
  kubeconfig: /d/server/admin.kubeconfig
  use it:     export KUBECONFIG=/d/server/admin.kubeconfig; /k/k1m kubectl get nodes -o wide
  logs:       /c/*.log
  stop:       make cluster-down
`
	if out.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
}
