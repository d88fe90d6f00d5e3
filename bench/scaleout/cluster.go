package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/test/localcluster"
	"k1m.dev/k1m/test/localcluster/network"
)

// Cluster is a cluster of the scenario, up.
type Cluster struct {
	Name    string
	configs []*rest.Config // each server's own API server, by index - 1
	pids    []int          // each server's `k1m server` process
	// etcdURLs are the servers' no-fsync etcd members (the Leases'
	// store) as the host reaches them; empty for a lone server.
	etcdURLs []string
	etcdTLS  etcd.TLS
	dataDirs []string // each server's --data-dir
	logs     []string // each server's log (its whole process tree)
	hostAddr netip.Addr
	h        *localcluster.Cluster
}

// WithCluster brings up the cluster named name (ClusterA or ClusterB):
// its servers each their own node, no agents, data under
// o.DataRoot/name (emptied first: a fresh cluster every run), logs in
// clusterDir. It runs fn on it and takes it down whatever fn returned.
func WithCluster(ctx context.Context, o Options, name, clusterDir string, out io.Writer, fn func(*Cluster) error) error {
	return WithShape(ctx, Shape{Name: name, Servers: ServersOf(name), K1M: o.K1M, ServerMemory: o.ServerMemory},
		o, clusterDir, out, fn)
}

// Shape is a local cluster a scenario brings up: its name (its data
// directory's), how many servers (each its own node) and agents, which
// k1m binary, each server's --memory-limit ("": the server's own sizing
// rule, as make cluster leaves it) and extra `k1m server` flags.
type Shape struct {
	Name         string
	Servers      int
	Agents       int
	K1M          string
	ServerMemory string
	ServerArgs   []string
}

// WithShape is WithCluster for any shape; o gives the images and the data
// root.
func WithShape(ctx context.Context, shape Shape, o Options, clusterDir string, out io.Writer, fn func(*Cluster) error) (err error) {
	name := shape.Name
	if err := machineFree(); err != nil {
		return err
	}
	h, err := newHarness(o, shape, clusterDir, out)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := h.Up(ctx); err != nil {
		// Down runs `k1m cleanup`, which stops every pod and containerd
		// of the machine: only when this run started a server, never
		// when Up refused because another cluster runs here.
		if startedSince(h, started) {
			err = errors.Join(err, down(ctx, h, name))
		}
		return fmt.Errorf("bringing the %s cluster up: %w", name, err)
	}
	defer func() { err = errors.Join(err, down(ctx, h, name)) }()
	c, err := newCluster(h, name)
	if err != nil {
		return err
	}
	return fn(c)
}

func newHarness(o Options, shape Shape, clusterDir string, out io.Writer) (*localcluster.Cluster, error) {
	name := shape.Name
	k1m, err := filepath.Abs(shape.K1M)
	if err != nil {
		return nil, err
	}
	images, err := filepath.Abs(o.ImagesDir)
	if err != nil {
		return nil, err
	}
	dataRoot := filepath.Join(o.DataRoot, name)
	if err := os.RemoveAll(dataRoot); err != nil {
		return nil, fmt.Errorf("emptying %s for a fresh cluster (--scaleout-data-root): %w; is a cluster of an earlier run still up? (K1M=%s CLUSTER_DIR=%s DATA_ROOT=%s go run ./test/cmd/k1m-cluster down)",
			dataRoot, err, k1m, clusterDir, dataRoot)
	}
	return localcluster.New(localcluster.Options{Servers: shape.Servers, Nodes: shape.Servers + shape.Agents, K1M: k1m, ClusterDir: clusterDir,
		DataRoot: dataRoot, ImagesDir: images, ServerMemory: shape.ServerMemory, ServerArgs: shape.ServerArgs, Out: out})
}

// apiPort is the port of every local cluster's API servers.
const apiPort = "6443"

// machineFree refuses while another local cluster runs (make cluster,
// make integration, one of an earlier run left up): checked before this
// cluster's data directory is emptied; Up checks again.
func machineFree() error {
	names, err := network.Namespaces(constants.LocalAgentPrefix, constants.LocalServerPrefix)
	if err != nil {
		return err
	}
	for _, ns := range names {
		if pids, err := network.Pids(ns); err == nil && len(pids) > 0 {
			return fmt.Errorf("another k1m cluster runs on this machine (network namespace %s holds pids %v); the benchmark's local clusters need the machine to themselves: take it down first (make cluster-down)", ns, pids)
		}
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("::1", apiPort), time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("something listens on port %s (a k1m server or kube-apiserver?); the benchmark's local clusters need the machine to themselves: take it down first (make cluster-down)", apiPort)
	}
	return nil
}

// startedSince tells whether a server's pid file was written since t:
// Up got past its checks and started something of this cluster.
func startedSince(h *localcluster.Cluster, t time.Time) bool {
	for _, s := range h.Plan().Servers {
		if st, err := os.Stat(s.PidFile); err == nil && !st.ModTime().Before(t) {
			return true
		}
	}
	return false
}

// down takes the cluster down even when ctx is done (an interrupted
// run): only one local cluster can exist on a machine.
func down(ctx context.Context, h *localcluster.Cluster, name string) error {
	if err := h.Down(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("taking the %s cluster down: %w", name, err)
	}
	return nil
}

func newCluster(h *localcluster.Cluster, name string) (*Cluster, error) {
	plan := h.Plan()
	c := &Cluster{Name: name, h: h}
	if plan.Servers[0].Netns != "" {
		c.hostAddr = plan.Bridge.Addr.Addr()
	}
	for _, s := range plan.Servers {
		cfg, err := restConfig(s)
		if err != nil {
			return nil, err
		}
		pid, err := localcluster.ReadPid(s.PidFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Label(), err)
		}
		c.configs, c.pids, c.dataDirs, c.logs = append(c.configs, cfg), append(c.pids, pid), append(c.dataDirs, s.DataDir), append(c.logs, s.LogFile)
		if len(plan.Servers) > 1 {
			port := strconv.Itoa(config.DefaultServer().NoFsyncEtcdPort)
			c.etcdURLs = append(c.etcdURLs, "https://"+net.JoinHostPort(s.Addr.String(), port))
		}
	}
	c.etcdTLS = etcd.ClientTLSIn(filepath.Join(plan.Servers[0].DataDir, "tls"))
	return c, nil
}

// RestartServer stops server k cleanly (from 1), as a rolling upgrade
// does, starts it again and returns once its API server is ready, with
// its new process's PID (ServerPID follows it).
func (c *Cluster) RestartServer(ctx context.Context, k int) (int, error) {
	if err := c.h.StopServer(ctx, k); err != nil {
		return 0, err
	}
	if err := c.h.StartServer(ctx, k); err != nil {
		return 0, err
	}
	pid, err := localcluster.ReadPid(c.h.Server(k).PidFile)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.h.Server(k).Label(), err)
	}
	c.pids[k-1] = pid
	return pid, nil
}

// HostAddr is this machine's address on the nodes' bridge, every node's
// gateway, reachable from every node and pod; invalid when server 1 runs
// in the host's own network namespace (a lone server) and there is no
// bridge.
func (c *Cluster) HostAddr() netip.Addr { return c.hostAddr }

// LogFile is server k's log, from 1: what the server and every process
// it starts write.
func (c *Cluster) LogFile(k int) string { return c.logs[k-1] }

// DataDir is server k's data directory, from 1 (its join token is
// DATA-DIR/token).
func (c *Cluster) DataDir(k int) string { return c.dataDirs[k-1] }

// ServerPID is server k's `k1m server` process, from 1.
func (c *Cluster) ServerPID(k int) int { return c.pids[k-1] }

// Config is a client of server k's own API server, from 1 (restConfig).
func (c *Cluster) Config(k int) *rest.Config { return rest.CopyConfig(c.configs[k-1]) }

// restConfig is a client of server s's own API server: its admin
// kubeconfig, at its own address (s.URL, when it has one of its own),
// protobuf like kubelets and no client-side rate limit, as the lease
// scenario's client.
func restConfig(s localcluster.Node) (*rest.Config, error) {
	cfg, err := kubeconfig.RESTConfig(s.AdminKubeconfig())
	if err != nil {
		return nil, err
	}
	if s.Addr.IsValid() {
		cfg.Host = s.URL()
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

// usage reads every server's control plane and, last, this process (the
// load generator).
//
// A server's cost is proc.ControlPlaneUsage: the `k1m server` process
// (kube-apiserver, both etcds, the kubelet and kube-proxy in the k1m
// build) and its controller-manager and scheduler children. containerd
// and the pods (CoreDNS) are not on the renewals' path and are left out.
// The server's cgroup cannot be read instead: it confines itself only in
// the memory controller (cgroup v1 here), which counts no CPU.
func (c *Cluster) usage() ([]proc.Usage, error) {
	out := make([]proc.Usage, 0, len(c.pids)+1)
	for i, pid := range append(append([]int{}, c.pids...), os.Getpid()) {
		read := proc.ControlPlaneUsage
		if i == len(c.pids) {
			read = proc.ReadUsage
		}
		u, err := read(pid)
		if err != nil && i < len(c.pids) {
			return nil, fmt.Errorf("server %d (pid %d): %w", i+1, pid, err)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Idle waits settle, then reads each server's CPU rate, in cores, over d
// with no flood.
func (c *Cluster) Idle(ctx context.Context, settle, d time.Duration) (ClusterInfo, error) {
	if err := clock.Sleep(ctx, settle); err != nil {
		return ClusterInfo{}, err
	}
	before, err := c.usage()
	if err != nil {
		return ClusterInfo{}, err
	}
	start := time.Now()
	if err := clock.Sleep(ctx, d); err != nil {
		return ClusterInfo{}, err
	}
	after, err := c.usage()
	if err != nil {
		return ClusterInfo{}, err
	}
	elapsed := time.Since(start).Seconds()
	info := ClusterInfo{Name: c.Name}
	for k := range c.pids {
		info.IdleCores = append(info.IdleCores, after[k].Sub(before[k]).CPU.Seconds()/elapsed)
	}
	return info, nil
}

// Flood runs one Lease flood with its renewers and watchers spread over
// the API servers via (from 1), reading every server's CPU and the raft
// leader of the Leases' store around it.
func (c *Cluster) Flood(ctx context.Context, via []int, round int, cfg leaseflood.Config) (Flood, error) {
	var configs []*rest.Config
	for _, k := range via {
		configs = append(configs, c.configs[k-1])
	}
	f := Flood{Cluster: c.Name, Via: via, Round: round}
	f.Leader, _ = c.Leader(ctx)
	var edges [][]proc.Usage
	probe := func() error {
		u, err := c.usage()
		edges = append(edges, u)
		return err
	}
	res, err := leaseflood.RunSpread(ctx, leaseflood.Clients{Workers: configs, Watchers: configs}, cfg, probe)
	if err != nil {
		return f, err
	}
	f.Result = res
	for k := range c.pids {
		f.Usage = append(f.Usage, edges[1][k].Sub(edges[0][k]))
	}
	f.LoadGen = edges[1][len(c.pids)].Sub(edges[0][len(c.pids)])
	f.LeaderAfter, _ = c.Leader(ctx)
	return f, nil
}

// statusTimeout bounds one etcd status request.
const statusTimeout = 5 * time.Second

// Leader is the server whose no-fsync etcd member leads the Leases' raft
// group: the lone server of a cluster of one.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	if len(c.etcdURLs) == 0 {
		return 1, nil
	}
	ids, leader, err := c.members(ctx)
	if err != nil {
		return 0, err
	}
	for k, id := range ids {
		if id == leader {
			return k + 1, nil
		}
	}
	return 0, fmt.Errorf("etcd leader %x is none of the servers' members %x", leader, ids)
}

// members reads each server's member ID and the leader's, as the members
// report them.
func (c *Cluster) members(ctx context.Context) (ids []uint64, leader uint64, err error) {
	cli, err := etcd.NewClient(c.etcdURLs, c.etcdTLS)
	if err != nil {
		return nil, 0, err
	}
	defer cli.Close()
	for _, u := range c.etcdURLs {
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		st, err := cli.Status(sctx, u)
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("etcd status of %s: %w", u, err)
		}
		ids = append(ids, st.Header.MemberId)
		leader = st.Leader
	}
	return ids, leader, nil
}

// MoveLeader makes server k's no-fsync member the Leases' raft leader, so
// that flooding through server 1 alone puts the front end and the leader
// on one server and the other two are plain followers.
func (c *Cluster) MoveLeader(ctx context.Context, k int) error {
	if len(c.etcdURLs) == 0 {
		return nil
	}
	ids, leader, err := c.members(ctx)
	if err != nil {
		return err
	}
	if leader == ids[k-1] {
		return nil
	}
	var from string
	for i, id := range ids {
		if id == leader {
			from = c.etcdURLs[i]
		}
	}
	if from == "" {
		return fmt.Errorf("etcd leader %x is none of the servers' members %x", leader, ids)
	}
	// etcd takes a leader transfer only from the leader itself.
	cli, err := etcd.NewClient([]string{from}, c.etcdTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*statusTimeout)
	defer cancel()
	if _, err := cli.MoveLeader(sctx, ids[k-1]); err != nil {
		return fmt.Errorf("moving the no-fsync etcd's leadership to server %d: %w", k, err)
	}
	return nil
}
