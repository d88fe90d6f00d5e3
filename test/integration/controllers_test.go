package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/localcluster"
)

// testControllerManagerKilled kills, with SIGKILL, the kube-controller-
// manager child of the server whose controller-manager leads (a lost
// election ends it the same way: upstream exits): the server process, its
// kube-apiserver and every node stay up, a new child runs within seconds,
// the server's log names the end and the next start, and the
// controller-manager Lease is held again (by a new identity: the dead
// child's ended with it).
func (m *multiCluster) testControllerManagerKilled(ctx context.Context, t *testing.T) {
	victim := m.latestLeader(t, "kube-controller-manager")
	s := m.h.Server(victim)
	serverPid, err := localcluster.ReadPid(s.PidFile)
	if err != nil {
		t.Fatal(err)
	}
	kcm, err := childPid(serverPid, "kube-controller-manager")
	if err != nil || kcm == 0 {
		t.Fatalf("no kube-controller-manager child of server %d (pid %d): %v", victim, serverPid, err)
	}
	client := m.client(victim)
	holder := leaseHolder(ctx, client, "kube-controller-manager")
	flaps := watchNotReady(ctx, t, client)
	t.Logf("killing server %d's kube-controller-manager (pid %d), leader as %s", victim, kcm, holder)
	if err := syscall.Kill(kcm, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var next int
	testutil.Eventually(t, 15*time.Second, "a new kube-controller-manager child", func() error {
		next, err = childPid(serverPid, "kube-controller-manager")
		if err != nil || next == 0 || next == kcm {
			return fmt.Errorf("child pid %d (%v), the killed one was %d", next, err, kcm)
		}
		return nil
	})
	t.Logf("a new kube-controller-manager (pid %d) runs %s after the kill", next, time.Since(killed).Round(time.Millisecond))
	if now, err := localcluster.ReadPid(s.PidFile); err != nil || now != serverPid || syscall.Kill(serverPid, 0) != nil {
		t.Errorf("server %d: pid %d (%v), want the same process %d still running", victim, now, err, serverPid)
	}
	if err := poll.APIServerReady(ctx, client.CoreV1().RESTClient()); err != nil {
		t.Errorf("server %d's kube-apiserver after the kill: %v", victim, err)
	}
	testutil.Eventually(t, 60*time.Second, "the controller-manager Lease held again", func() error {
		if now := leaseHolder(ctx, client, "kube-controller-manager"); now == "" || now == holder {
			return fmt.Errorf("holder %q, the killed one was %q", now, holder)
		}
		return nil
	})
	t.Logf("the controller-manager Lease is held again %s after the kill", time.Since(killed).Round(time.Second))
	log, err := os.ReadFile(s.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	ended := regexp.MustCompile(`(?m)^k1m server: kube-controller-manager ended \(signal: killed\) after \S+; starting it again in 1s$`)
	if got := len(ended.FindAll(log, -1)); got != 1 {
		t.Errorf("server %d logged %d lines that its kube-controller-manager was killed and starts again, want 1", victim, got)
	}
	if got := flaps.stop(); len(got) > 0 {
		t.Errorf("nodes went NotReady after a controller-manager was killed: %v", got)
	}
}

// latestLeader is the server whose log says last (klog's time stamps:
// one clock, one year) that its component took the leader Lease.
func (m *multiCluster) latestLeader(t *testing.T, component string) int {
	t.Helper()
	leader, latest := 0, ""
	for i := 1; i <= multiServers; i++ {
		data, err := os.ReadFile(m.h.Server(i).LogFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, "successfully acquired lease kube-system/"+component) || len(line) < 21 || line[0] != 'I' {
				continue
			}
			if at := line[1:21]; at > latest { // "MMDD hh:mm:ss.uuuuuu"
				leader, latest = i, at
			}
		}
	}
	if leader == 0 {
		t.Fatalf("no server logged that its %s took the leader Lease", component)
	}
	return leader
}

// childPid is the pid of the child of parent that runs `k1m component`,
// 0 if there is none.
func childPid(parent int, component string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if ppid, err := proc.ParseStatParent(string(stat)); err != nil || ppid != parent {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if argv := strings.Split(string(cmdline), "\x00"); len(argv) > 1 && argv[1] == component {
			return pid, nil
		}
	}
	return 0, nil
}
