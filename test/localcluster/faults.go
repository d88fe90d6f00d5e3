package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"k1m.dev/k1m/test/localcluster/network"
)

// The verbs below are the process and network faults of the fault
// campaign (test/faults): a server killed, launched without waiting (a
// server alone cannot get a quorum, so waiting for it one at a time would
// never end), and a node cut off from some addresses with ip6tables
// inside its network namespace (a link taken down would lose its
// addresses for good: docs/server.md).

// KillServer kills server i with SIGKILL, as a crash would, and waits for
// it to be gone; its pid file stays (StartServer overwrites it).
func (c *Cluster) KillServer(i int) error {
	n, err := c.plan.serverNode(i)
	if err != nil {
		return err
	}
	pid, err := ReadPid(n.PidFile)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Label(), err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s (pid %d): %w", n.Label(), pid, err)
	}
	if !waitGone(pid, 10*time.Second) {
		return fmt.Errorf("%s (pid %d) still runs 10 s after SIGKILL", n.Label(), pid)
	}
	c.logf("%s (pid %d) killed with SIGKILL", n.Label(), pid)
	return nil
}

// LaunchServer starts server i in the background and returns at once;
// WaitServer waits for it.
func (c *Cluster) LaunchServer(i int) error { return c.startServer(i) }

// WaitServer returns once server i is up, as StartServer does.
func (c *Cluster) WaitServer(ctx context.Context, i int) error {
	n, err := c.plan.serverNode(i)
	if err != nil {
		return err
	}
	return c.waitServer(ctx, n)
}

// ServerRunning tells whether server i's process runs.
func (c *Cluster) ServerRunning(i int) bool {
	n, err := c.plan.serverNode(i)
	return err == nil && runningPid(n.PidFile) != 0
}

// faultComment marks the rules Cut inserts, so that they are told from
// kube-proxy's and any other.
const faultComment = "k1m-faults"

// Cut drops every packet between node n and each of peers, both ways,
// inside n's network namespace; Heal removes exactly those rules.
func Cut(n Node, peers ...netip.Addr) error { return cutRules(n, "-I", peers) }

// Heal undoes Cut.
func Heal(n Node, peers ...netip.Addr) error { return cutRules(n, "-D", peers) }

func cutRules(n Node, op string, peers []netip.Addr) error {
	if n.Netns == "" {
		return fmt.Errorf("%s runs in the host's network namespace: only a node in a namespace of its own can be cut off", n.Label())
	}
	var errs []error
	for _, p := range peers {
		for _, rule := range [][]string{
			{"INPUT", "-s", p.String()},
			{"OUTPUT", "-d", p.String()},
		} {
			args := append([]string{"-w", op}, rule...)
			args = append(args, "-m", "comment", "--comment", faultComment, "-j", "DROP")
			errs = append(errs, ip6tables(n.Netns, args...))
		}
	}
	return errors.Join(errs...)
}

// ip6tables runs ip6tables in network namespace ns.
func ip6tables(ns string, args ...string) error {
	cmd := exec.Command("ip6tables", args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := network.Start(cmd, ns, ""); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("ip6tables %s in %s: %w: %s", strings.Join(args, " "), ns, err, strings.TrimSpace(out.String()))
	}
	return nil
}
