package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"k1m.dev/k1m/pkg/clock"
)

// kubectlTimeout bounds one kubectl call of a wait, so that a hung
// connection costs one poll, not the whole wait.
const kubectlTimeout = 10 * time.Second

// kubectl runs `k1m kubectl` against the server whose admin kubeconfig is
// kubeconfig.
func (c *Cluster) kubectl(ctx context.Context, kubeconfig string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	all := append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)
	return exec.CommandContext(ctx, c.opts.K1M, all...).Output()
}

// serverUp tells whether server n wrote its join token and its
// kube-apiserver answers /readyz through n's admin kubeconfig.
func (c *Cluster) serverUp(ctx context.Context, n Node) bool {
	if info, err := os.Stat(n.TokenFile()); err != nil || info.Size() == 0 {
		return false
	}
	_, err := c.kubectl(ctx, n.AdminKubeconfig(), "get", "--raw", "/readyz")
	return err == nil
}

// exited is an error when server n's process is gone, with the end of
// its log.
func exited(n Node) error {
	if runningPid(n.PidFile) != 0 {
		return nil
	}
	return fmt.Errorf("%s exited; see %s:\n%s", n.Label(), n.LogFile, tail(n.LogFile, 5))
}

// waitServer returns once server n is up (serverUp), and fails when its
// process exits or Timeout passes first.
func (c *Cluster) waitServer(ctx context.Context, n Node) error {
	deadline := time.Now().Add(c.opts.Timeout)
	for !c.serverUp(ctx, n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not up after %s; see %s", n.Label(), c.opts.Timeout, n.LogFile)
		}
		if err := exited(n); err != nil {
			return err
		}
		if err := clock.Sleep(ctx, 2*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// readyJSONPath prints each node's Ready condition status, one a line.
const readyJSONPath = `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`

// countReady counts the nodes whose Ready status is True in kubectl's
// readyJSONPath output.
func countReady(out string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "True" {
			n++
		}
	}
	return n
}

// waitNodes returns once every node is Ready, through server 1; it fails
// when a server exits or Timeout passes first.
func (c *Cluster) waitNodes(ctx context.Context) error {
	deadline, ready := time.Now().Add(c.opts.Timeout), 0
	for {
		for _, s := range c.plan.Servers {
			if err := exited(s); err != nil {
				return err
			}
		}
		out, _ := c.kubectl(ctx, c.plan.Servers[0].AdminKubeconfig(), "get", "nodes", "-o", readyJSONPath)
		ready = countReady(string(out))
		if ready >= c.opts.Nodes {
			c.logf("%d/%d nodes Ready after %s", ready, c.opts.Nodes, c.elapsed())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d/%d nodes Ready after %s; see %s/*.log", ready, c.opts.Nodes, c.opts.Timeout, c.opts.ClusterDir)
		}
		c.logf("waiting: %d/%d nodes Ready (%s)", ready, c.opts.Nodes, c.elapsed())
		if err := clock.Sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

func (c *Cluster) elapsed() time.Duration { return time.Since(c.began).Round(time.Second) }
