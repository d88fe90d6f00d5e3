package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/clustercheck"
	"k1m.dev/k1m/test/localcluster"
)

// testControllerManagerKilled kills, with SIGKILL, the kube-controller-
// manager child of the server whose controller-manager leads (a lost
// election ends it the same way: upstream exits): the server process, its
// kube-apiserver and every node stay up, a new child runs within seconds,
// and the controller-manager Lease is held again (by a new identity: the
// dead child's ended with it). The supervisor's line naming the end and
// the next start is pkg/multicall's unit test's.
func (m *multiCluster) testControllerManagerKilled(ctx context.Context, t *testing.T) {
	victim, holder := m.controllerManagerLeader(ctx, t)
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
	// One /readyz may time out on a busy machine (it checks etcd through
	// a 5 s client); an API server that went down with its child does not
	// come back within the wait.
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("server %d's kube-apiserver ready after the kill", victim), func() error {
		return poll.APIServerReady(ctx, client.CoreV1().RESTClient())
	})
	testutil.Eventually(t, 60*time.Second, "the controller-manager Lease held again", func() error {
		if now := leaseHolder(ctx, client, "kube-controller-manager"); now == "" || now == holder {
			return fmt.Errorf("holder %q, the killed one was %q", now, holder)
		}
		return nil
	})
	t.Logf("the controller-manager Lease is held again %s after the kill", time.Since(killed).Round(time.Second))
	if got := flaps.stop(); len(got) > 0 {
		t.Errorf("nodes went NotReady after a controller-manager was killed: %v", got)
	}
}

// controllerManagerLeader is the server whose kube-controller-manager
// leads now, and its identity (clustercheck.ControllerManagerLeader),
// waiting while leadership moves.
func (m *multiCluster) controllerManagerLeader(ctx context.Context, t *testing.T) (int, string) {
	t.Helper()
	var leader int
	var holder string
	testutil.Eventually(t, 60*time.Second, "the server of the kube-controller-manager leader", func() error {
		var err error
		leader, holder, err = clustercheck.ControllerManagerLeader(ctx, m.client(1), m.h.ServerNames())
		return err
	})
	return leader, holder
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
