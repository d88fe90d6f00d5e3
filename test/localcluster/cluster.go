// Package localcluster runs a k1m cluster on one machine, for
// development and tests (`make cluster`, `make integration`, `make
// conformance-test`): Servers `k1m server`s and Nodes-Servers `k1m
// agent`s, the agents (and the servers, when there are several) each in
// a network namespace of its own with its own IPv6 address on a bridge
// (package network), several servers each in a memory cgroup of its own.
// kind is the model: options are defaulted, validated, turned into a
// plan (Plan: names, addresses, directories, exact command lines) and
// carried out as a list of actions.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/netutil"
	"k1m.dev/k1m/pkg/nodename"
	"k1m.dev/k1m/test/localcluster/network"
)

// Cluster is a local cluster laid out from its options.
type Cluster struct {
	opts  Options
	plan  Plan
	began time.Time
	// routed are the pod ranges RouteNodeRanges routed, with the node
	// address each goes via.
	routed map[netip.Prefix]netip.Addr
}

// New defaults and validates o and lays the cluster out; nothing is
// started yet.
func New(o Options) (*Cluster, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Cluster{opts: o, plan: newPlan(o), began: time.Now(), routed: map[netip.Prefix]netip.Addr{}}, nil
}

// Options are the cluster's options, defaults filled in.
func (c *Cluster) Options() Options { return c.opts }

// Plan is the cluster's layout.
func (c *Cluster) Plan() Plan { return c.plan }

// UseK1M makes every later start of a server or agent run the k1m binary
// at path (a rolling upgrade: each process restarted after this runs the
// new release); the running ones keep theirs.
func (c *Cluster) UseK1M(path string) {
	c.opts.K1M, c.opts.EarlierRelease = path, false
	c.plan.opts.K1M, c.plan.opts.EarlierRelease = path, false
	c.logf("later starts run %s", path)
}

// Server is server i (from 1).
func (c *Cluster) Server(i int) Node { return c.plan.Servers[i-1] }

// ServerNames are the servers' names, server 1's first: in a namespace of
// its own, a server's hostname too.
func (c *Cluster) ServerNames() []string {
	names := make([]string, len(c.plan.Servers))
	for i, s := range c.plan.Servers {
		names[i] = s.Name
	}
	return names
}

// Agent is agent i (from 1).
func (c *Cluster) Agent(i int) Node { return c.plan.Agents[i-1] }

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.opts.Out, "cluster: "+format+"\n", args...)
}

// action is one step of bringing the cluster up.
type action struct {
	name string
	run  func(context.Context) error
}

// upActions are the steps of Up, in order: servers one after another,
// each up before the next (the first makes the cluster, the others join
// it), then the agents, which join server 1.
func (c *Cluster) upActions() []action {
	acts := []action{
		{"refuse a running cluster", c.refuseRunning},
		{"check that no other cluster runs", c.checkMachineFree},
		{"check the disk has room for pods", c.checkDiskRoom},
		{"check that the data is this layout's", c.checkDataLayout},
		{"record the layout", c.recordLayout},
	}
	if len(c.plan.namespaced()) > 0 {
		acts = append(acts, action{"network", c.setUpNetwork})
	}
	for _, s := range c.plan.Servers {
		acts = append(acts, action{"start " + s.Label(), func(ctx context.Context) error { return c.StartServer(ctx, s.Index) }})
	}
	for _, a := range c.plan.Agents {
		acts = append(acts, action{"start " + a.Label(), func(context.Context) error { return c.startAgent(a.Index, true) }})
	}
	acts = append(acts, action{"wait for every node Ready", c.waitNodes})
	if c.opts.PodRoutes == constants.PodRoutesProvider {
		acts = append(acts, action{"route every node's pod range (the provider's router)", c.RouteNodeRanges})
	}
	return append(acts, action{"summary", c.summary})
}

// Up brings the cluster up and returns once every node is Ready. On
// failure what started keeps running, for a look at it: Down stops it.
func (c *Cluster) Up(ctx context.Context) error {
	c.began = time.Now()
	for _, a := range c.upActions() {
		if err := a.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// checkDataLayout refuses, before anything starts, servers whose data
// was made for other node names: a lone server's data is its host's
// node, several servers' are k1m-server-I (and the other way round), and
// a server refuses data made for another name. It names the command to
// run instead.
func (c *Cluster) checkDataLayout(context.Context) error {
	var errs []error
	for _, n := range c.plan.Servers {
		name, _, err := netutil.NodeIdentity(n.Name, "::1")
		if err != nil {
			return err
		}
		recorded, err := nodename.Recorded(n.DataDir, filepath.Join(n.DataDir, "agent", "kubelet-pki", "kubelet-client-current.pem"))
		if err != nil {
			return err
		}
		if recorded != "" && recorded != name {
			errs = append(errs, fmt.Errorf("%s: its data %s was made for node %s, and SERVERS=%d names it %s", n.Label(), n.DataDir, recorded, c.opts.Servers, name))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w\nthe data under %s is another layout's cluster: start it as it was made (the SERVERS it had), or start from empty data: make cluster-down, rm -rf %s, then make cluster again",
		errors.Join(errs...), c.opts.DataRoot, c.opts.DataRoot)
}

// Layout files in ClusterDir: what Up was asked for, so that later
// verbs need not be told again (ReadLayout).
const (
	nodesFile   = "nodes"
	serversFile = "servers"
)

func (c *Cluster) recordLayout(context.Context) error {
	if err := os.MkdirAll(c.opts.ClusterDir, 0o755); err != nil {
		return err
	}
	for file, n := range map[string]int{nodesFile: c.opts.Nodes, serversFile: c.opts.Servers} {
		if err := os.WriteFile(filepath.Join(c.opts.ClusterDir, file), []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadLayout reads the servers and nodes Up recorded in clusterDir; ok
// is false when it recorded none (no cluster up, or one taken down).
func ReadLayout(clusterDir string) (servers, nodes int, ok bool) {
	read := func(file string) int {
		data, _ := os.ReadFile(filepath.Join(clusterDir, file))
		n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return n
	}
	nodes, servers = read(nodesFile), read(serversFile)
	if servers == 0 && nodes > 0 {
		servers = 1 // recorded by the shell harness, which ran one server
	}
	return servers, nodes, nodes > 0
}

func (c *Cluster) summary(context.Context) error {
	s1 := c.plan.Servers[0]
	what := fmt.Sprintf("%d node(s)", c.opts.Nodes)
	if c.opts.Servers > 1 {
		what += fmt.Sprintf(", %d servers (%s)", c.opts.Servers, strings.Join(c.serverURLs(), ", "))
	}
	kubeconfig := s1.AdminKubeconfig()
	fmt.Fprintf(c.opts.Out, "\nk1m cluster up: %s.\n  kubeconfig: %s\n  use it:     export KUBECONFIG=%s; %s kubectl get nodes -o wide\n",
		what, kubeconfig, kubeconfig, c.opts.K1M)
	if filepath.Clean(kubeconfig) == datadir.DefaultAdminKubeconfig {
		fmt.Fprintf(c.opts.Out, "              (or %s kubectl ..., which finds it by itself)\n", c.opts.K1M)
	}
	fmt.Fprintf(c.opts.Out, "  logs:       %s/*.log\n  stop:       make cluster-down\n", c.opts.ClusterDir)
	return nil
}

func (c *Cluster) serverURLs() []string {
	var urls []string
	for _, s := range c.plan.Servers {
		urls = append(urls, s.Name+" "+s.URL())
	}
	return urls
}

// joinToken is the cluster's join token, which server 1 keeps.
func (c *Cluster) joinToken() (string, error) {
	data, err := os.ReadFile(c.plan.Servers[0].TokenFile())
	if err != nil {
		return "", fmt.Errorf("reading the join token: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// serverToken is the cluster's server token, which server 1 keeps.
func (c *Cluster) serverToken() (string, error) {
	data, err := os.ReadFile(c.plan.Servers[0].ServerTokenFile())
	if err != nil {
		return "", fmt.Errorf("reading the server token: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// startServer starts server i in the background.
func (c *Cluster) startServer(i int) error {
	n, err := c.plan.serverNode(i)
	if err != nil {
		return err
	}
	token := ""
	if i > 1 {
		if token, err = c.serverToken(); err != nil {
			return err
		}
	}
	return c.startBackground(n, c.plan.ServerCommand(i, token))
}

// StartServer starts server i and returns once it is up: its join token
// written and its kube-apiserver ready; with several servers, once its
// memory cgroup is checked too.
func (c *Cluster) StartServer(ctx context.Context, i int) error {
	if err := c.startServer(i); err != nil {
		return err
	}
	n := c.plan.Servers[i-1]
	if err := c.waitServer(ctx, n); err != nil {
		return err
	}
	if n.Name == "" {
		return nil
	}
	return c.checkServerMemory(n)
}

// AddServerArgs adds flags to every server's command from its next start
// on: a setting rolled out by restarting the servers one at a time.
func (c *Cluster) AddServerArgs(args ...string) {
	c.opts.ServerArgs = append(append([]string{}, c.opts.ServerArgs...), args...)
	c.plan.opts.ServerArgs = c.opts.ServerArgs
}

// StopServer stops server i cleanly (SIGTERM; SIGKILL after 90 s).
func (c *Cluster) StopServer(ctx context.Context, i int) error {
	n, err := c.plan.serverNode(i)
	if err != nil {
		return err
	}
	pid, killed, err := stopPid(n.PidFile)
	if err != nil {
		return err
	}
	c.logf("%s", stopped(n.Label(), pid, killed))
	return nil
}

func stopped(label string, pid int, killed bool) string {
	switch {
	case pid == 0:
		return label + " was not running"
	case killed:
		return fmt.Sprintf("%s (pid %d) stopped with SIGKILL: SIGTERM had not stopped it in %s", label, pid, stopGrace)
	}
	return fmt.Sprintf("%s (pid %d) stopped", label, pid)
}

// RestartServer kills server i with SIGKILL, as a crash would, and starts
// it again; it does not wait for it.
func (c *Cluster) RestartServer(ctx context.Context, i int) error {
	if err := c.KillServer(i); err != nil {
		return err
	}
	if err := clock.Sleep(ctx, time.Second); err != nil {
		return err
	}
	return c.startServer(i)
}

// ResetServer runs the stopped server 1 once with --cluster-reset, and
// --cluster-reset-restore-path file when file is not empty, its output
// going to out and its log; the error is its exit (*exec.ExitError).
func (c *Cluster) ResetServer(ctx context.Context, out io.Writer, file string) error {
	flags := []string{"--cluster-reset"}
	if file != "" {
		flags = append(flags, "--cluster-reset-restore-path", file)
	}
	return c.RunServer(ctx, out, flags...)
}

// RunServer runs the stopped server 1 in the foreground with extra flags
// (to see it refuse them), its output going to out and its log; the error
// is its exit (*exec.ExitError).
func (c *Cluster) RunServer(ctx context.Context, out io.Writer, flags ...string) error {
	cmd := c.plan.ServerCommand(1, "")
	cmd.Args = append(cmd.Args, flags...)
	return c.runForeground(ctx, c.plan.Servers[0], cmd, out)
}

// startAgent starts agent i in the background, joining with the cluster's
// token when join is true, else on its own certificate.
func (c *Cluster) startAgent(i int, join bool) error {
	n, err := c.plan.agentNode(i)
	if err != nil {
		return err
	}
	token := ""
	if join {
		if token, err = c.joinToken(); err != nil {
			return err
		}
	}
	return c.startBackground(n, c.plan.AgentCommand(i, token))
}

// RestartAgent stops agent i and starts it again with no token: a joined
// node needs none.
func (c *Cluster) RestartAgent(ctx context.Context, i int) error {
	n, err := c.plan.agentNode(i)
	if err != nil {
		return err
	}
	pid, killed, err := stopPid(n.PidFile)
	if err != nil {
		return err
	}
	c.logf("%s", stopped(n.Label(), pid, killed))
	return c.startAgent(i, false)
}

// Down stops every agent, then every server, of the cluster in
// ClusterDir, whatever its layout; runs `k1m cleanup` (processes,
// mounts, pod namespaces, packet-filter rules, cgroups); and deletes the
// namespaces and the bridge. Data stays under DataRoot. It goes on past
// a failed step and reports every one.
func (c *Cluster) Down(ctx context.Context) error {
	var errs []error
	agents, _ := filepath.Glob(filepath.Join(c.opts.ClusterDir, constants.LocalAgentPrefix+"*.pid"))
	servers, _ := filepath.Glob(filepath.Join(c.opts.ClusterDir, "server*.pid"))
	errs = append(errs, c.stopAll(agents), c.stopAll(servers))
	errs = append(errs, c.cleanup(ctx))
	busy, err := c.deleteNamespaces()
	errs = append(errs, err)
	if !busy {
		errs = append(errs, c.deleteBridge())
	}
	errs = append(errs, network.ReleaseRunDir())
	if left := serverCgroupsLeft(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("memory cgroups left after k1m cleanup: %s", strings.Join(left, " ")))
	}
	for _, f := range []string{nodesFile, serversFile} {
		os.Remove(filepath.Join(c.opts.ClusterDir, f))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.logf("stopped; data kept under %s (delete it for a fresh cluster)", c.opts.DataRoot)
	return nil
}

// stopAll stops the processes of pidFiles at once (stopPid each).
func (c *Cluster) stopAll(pidFiles []string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(pidFiles))
	for i, f := range pidFiles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pid, killed, err := stopPid(f)
			if pid != 0 {
				c.logf("%s", stopped(c.pidFileLabel(f), pid, killed))
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pidFileLabel is Node.Label of the node whose pid file is file: the
// plan's, else one read from the file's name (server.pid, server-I.pid,
// k1m-node-I.pid) for a cluster of another layout.
func (c *Cluster) pidFileLabel(file string) string {
	for _, n := range append(append([]Node{}, c.plan.Servers...), c.plan.Agents...) {
		if n.PidFile == file {
			return n.Label()
		}
	}
	name := strings.TrimSuffix(filepath.Base(file), ".pid")
	switch {
	case name == "server":
		return "k1m server"
	case strings.HasPrefix(name, "server-"):
		return "k1m server " + constants.LocalServerPrefix + strings.TrimPrefix(name, "server-")
	}
	return "k1m agent " + name
}

// cleanup runs `k1m cleanup --data-dir DataRoot`.
func (c *Cluster) cleanup(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, c.opts.K1M, "cleanup", "--data-dir", c.opts.DataRoot)
	cmd.Stdout, cmd.Stderr = c.opts.Out, c.opts.Out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s cleanup --data-dir %s: %w", c.opts.K1M, c.opts.DataRoot, err)
	}
	return nil
}
