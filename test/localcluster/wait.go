package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/constants"
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

// serverUp tells whether server n wrote its join token in this start
// (and, as the first of several, the server token the others join with:
// a data directory from a lone server keeps the join token of its last
// start, which says nothing of the bundle the others need), its
// kube-apiserver answers /readyz through n's admin kubeconfig, and, one
// of several, it published itself (published). The token files are
// written last: one older than n's pid file is a previous start's, and a
// restarted server has not finished its start (what it records in the
// cluster at each start, say) until it rewrites them.
func (c *Cluster) serverUp(ctx context.Context, n Node) bool {
	files := []string{n.TokenFile()}
	if len(c.plan.Servers) > 1 && n.Index == 1 {
		files = append(files, n.ServerTokenFile())
	}
	for _, f := range files {
		if !writtenSince(f, n.PidFile) {
			return false
		}
	}
	if _, err := c.kubectl(ctx, n.AdminKubeconfig(), "get", "--raw", "/readyz"); err != nil {
		return false
	}
	return len(c.plan.Servers) == 1 || c.published(ctx, n)
}

// published tells whether server n of several has recorded itself in the
// ConfigMap joining servers read (its URL, its etcd, the sealed shared
// files, in one write): /readyz and its token files come before that
// write on a start that turns a lone server's data into the first of
// several, and a server joining then would find nothing to join.
func (c *Cluster) published(ctx context.Context, n Node) bool {
	tmpl := `go-template={{index .data "server.` + n.Name + `"}}`
	out, err := c.kubectl(ctx, n.AdminKubeconfig(), "get", "configmap", "-n", "kube-system", constants.ServerBootstrapName, "-o", tmpl)
	return err == nil && len(bytes.TrimSpace(out)) > 0 && !bytes.Contains(out, []byte("<no value>"))
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

// readiness compares the nodes a cluster runs with the ones it expects.
type readiness struct {
	Ready   []string // expected and Ready
	Missing []string // expected, not (yet) Ready or not registered
	// Others are Ready nodes the plan does not name (a node left
	// registered by an earlier cluster in the same data, under another
	// name): not counted.
	Others []string
}

// readinessOf reads kubectl's readyJSONPath output against the expected
// node names.
func readinessOf(out string, expected []string) readiness {
	var r readiness
	ready := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		name, status, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch {
		case status != "True":
		case slices.Contains(expected, name):
			ready[name] = true
		default:
			r.Others = append(r.Others, name)
		}
	}
	for _, name := range expected {
		if ready[name] {
			r.Ready = append(r.Ready, name)
		} else {
			r.Missing = append(r.Missing, name)
		}
	}
	return r
}

// describe says what is missing and what is not counted, "" when nothing.
func (r readiness) describe() string {
	var parts []string
	if len(r.Missing) > 0 {
		parts = append(parts, "not Ready: "+strings.Join(r.Missing, ", "))
	}
	if len(r.Others) > 0 {
		parts = append(parts, "not counted, not in this cluster's plan: "+strings.Join(r.Others, ", ")+" (left by an earlier cluster in this data: k1m kubectl delete node NAME)")
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// waitNodes returns once every node the plan names is Ready, through
// server 1; it fails when a server exits or Timeout passes first.
func (c *Cluster) waitNodes(ctx context.Context) error {
	deadline, expected := time.Now().Add(c.opts.Timeout), c.plan.NodeNames()
	for {
		for _, s := range c.plan.Servers {
			if err := exited(s); err != nil {
				return err
			}
		}
		// Each node's range routed as it gets one; a failure is tried
		// again at the next round, and reported by Up's own round after.
		_ = c.RouteNodeRanges(ctx)
		out, _ := c.kubectl(ctx, c.plan.Servers[0].AdminKubeconfig(), "get", "nodes", "-o", readyJSONPath)
		r := readinessOf(string(out), expected)
		if len(r.Missing) == 0 {
			c.logf("%d/%d nodes Ready after %s%s", len(r.Ready), len(expected), c.elapsed(), r.describe())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d/%d nodes Ready after %s%s; see %s/*.log", len(r.Ready), len(expected), c.opts.Timeout, r.describe(), c.opts.ClusterDir)
		}
		c.logf("waiting: %d/%d nodes Ready (%s)%s", len(r.Ready), len(expected), c.elapsed(), r.describe())
		if err := clock.Sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

func (c *Cluster) elapsed() time.Duration { return time.Since(c.began).Round(time.Second) }

// writtenSince tells whether file is not empty and was written at or
// after since was (the pid file of the process that writes it).
func writtenSince(file, since string) bool {
	info, err := os.Stat(file)
	if err != nil || info.Size() == 0 {
		return false
	}
	start, err := os.Stat(since)
	return err == nil && !info.ModTime().Before(start.ModTime())
}
