package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/poll"
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

// serverUp tells whether server n wrote its join token (and, as the
// first of several, the server token the others join with: a data
// directory from a lone server keeps the join token of its last start,
// which says nothing of the bundle the others need) and its
// kube-apiserver answers /readyz through n's admin kubeconfig.
func (c *Cluster) serverUp(ctx context.Context, n Node) bool {
	files := []string{n.TokenFile()}
	if len(c.plan.Servers) > 1 && n.Index == 1 {
		files = append(files, n.ServerTokenFile())
	}
	for _, f := range files {
		if info, err := os.Stat(f); err != nil || info.Size() == 0 {
			return false
		}
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
	err := poll.Until(ctx, 2*time.Second, c.opts.Timeout, n.Label()+" up", func(ctx context.Context) error {
		if c.serverUp(ctx, n) {
			return nil
		}
		if err := exited(n); err != nil {
			return poll.Stop(err)
		}
		return errors.New("not up yet")
	})
	if errors.Is(err, poll.ErrTimeout) {
		return fmt.Errorf("%s not up after %s; see %s", n.Label(), c.opts.Timeout, n.LogFile)
	}
	return err
}

// readyJSONPath prints each node's name and Ready condition status, one
// a line.
const readyJSONPath = `jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`

// countReady counts the nodes of names whose Ready status is True in
// kubectl's readyJSONPath output, and lists the Ready nodes the plan does
// not name (a node left registered by an earlier cluster in the same data,
// under another name), which are not counted.
func countReady(out string, names []string) (ready int, others []string) {
	for _, line := range strings.Split(out, "\n") {
		name, status, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch {
		case status != "True":
		case slices.Contains(names, name):
			ready++
		default:
			others = append(others, name)
		}
	}
	return ready, others
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
		var others []string
		ready, others = countReady(string(out), c.plan.NodeNames())
		if ready >= c.opts.Nodes {
			c.logf("%d/%d nodes Ready after %s", ready, c.opts.Nodes, c.elapsed())
			return nil
		}
		not := ""
		if len(others) > 0 {
			not = fmt.Sprintf("; not counted, not in this cluster's plan: %s (left by an earlier cluster in this data: k1m kubectl delete node NAME)", strings.Join(others, ", "))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d/%d nodes Ready after %s%s; see %s/*.log", ready, c.opts.Nodes, c.opts.Timeout, not, c.opts.ClusterDir)
		}
		c.logf("waiting: %d/%d nodes Ready (%s)%s", ready, c.opts.Nodes, c.elapsed(), not)
		if err := clock.Sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

func (c *Cluster) elapsed() time.Duration { return time.Since(c.began).Round(time.Second) }
