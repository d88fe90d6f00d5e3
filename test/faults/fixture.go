// Package faults is k1m's fault campaign, in the manner of Jepsen and of
// etcd's robustness tests: a cluster of 3 servers and 2 agents
// (test/localcluster) takes traffic while a scenario injects faults
// (processes killed, stopped and started, ip6tables partitions, a full
// disk) and heals them; what the clients saw is recorded as it happens
// and checked against the invariants after each scenario. `make faults`
// runs it (docs/ha.md#the-fault-campaign has the scenarios, the invariants
// and the last run's table).
//
// The traffic: one Writer per API server, acknowledging ConfigMap
// creates; a Monitor reading Node readiness and node Leases through
// every server every second.
package faults

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/testutil"
	"k1m.dev/k1m/test/database"
	"k1m.dev/k1m/test/localcluster"
)

// The campaign's cluster: 3 servers (so that one may fail and a majority
// runs) and 2 agents.
const (
	Servers = 3
	Nodes   = 5
)

// Options place the campaign's cluster.
type Options struct {
	K1M, ImagesDir, ClusterDir, DataRoot string
	// FromK1M is an earlier release's binary the cluster starts from (the
	// upgrade scenario moves it to K1M); "": K1M.
	FromK1M string
	// ViaK1M is a release between FromK1M and K1M that packages the
	// components FromK1M lacks; the upgrade scenario moves the cluster to
	// it, starts the replicated database, then moves it to K1M.
	ViaK1M string
	// DatabaseImage is the database's image archive (test/database), for
	// the upgrade scenario.
	DatabaseImage string
	// EtcdDisk is the server (1 to 3; 0: none) whose durable etcd gets a
	// file system of its own, a tmpfs of EtcdDiskSize, for the disk-full
	// scenario to fill without filling the machine's disk.
	EtcdDisk     int
	EtcdDiskSize string
	// Partitions are the store partitions the cluster is made with
	// (--etcd-partitions); none: the durable etcd holds every resource
	// but Events and Leases. With FromK1M (earlier releases have none),
	// the upgrade scenario moves the resources into them.
	Partitions []string
	Out        io.Writer
}

// serverArgs are the flags every server of the campaign gets.
func (o Options) serverArgs() []string {
	if len(o.Partitions) == 0 || o.FromK1M != "" {
		return nil
	}
	return []string{"--etcd-partitions=" + strings.Join(o.Partitions, ",")}
}

// Fixture is the running cluster of the campaign and what the
// scenarios did to it: which servers are out (stopped, killed or cut off:
// not counted in the majority, their reads not trusted) and which nodes
// may be NotReady now (a server out takes its own node with it).
type Fixture struct {
	H       *localcluster.Cluster
	opts    Options
	clients []kubernetes.Interface

	mu      sync.Mutex
	out     map[int]bool
	excused map[string]bool
}

// Start brings the campaign's cluster up.
func Start(ctx context.Context, o Options) (*Fixture, error) {
	k1m := o.K1M
	if o.FromK1M != "" {
		k1m = o.FromK1M
	}
	// Zones for the replicated database's members, one a zone (the
	// upgrade scenario's).
	h, err := localcluster.New(localcluster.Options{Servers: Servers, Nodes: Nodes, Zones: database.Replicas, K1M: k1m, EarlierRelease: o.FromK1M != "",
		ClusterDir: o.ClusterDir, DataRoot: o.DataRoot, ImagesDir: o.ImagesDir, Timeout: 180 * time.Second, Out: o.Out, ServerArgs: o.serverArgs()})
	if err != nil {
		return nil, err
	}
	f := &Fixture{H: h, opts: o, out: map[int]bool{}, excused: map[string]bool{}}
	if o.EtcdDisk != 0 {
		if err := mountEtcdDisk(h.Server(o.EtcdDisk), o.EtcdDiskSize); err != nil {
			return nil, err
		}
	}
	if err := h.Up(ctx); err != nil {
		return f, err
	}
	for i := 1; i <= Servers; i++ {
		cfg, err := testutil.RESTConfig(h.Server(i).AdminKubeconfig())
		if err != nil {
			return f, err
		}
		cfg.Timeout = 5 * time.Second
		f.clients = append(f.clients, kubernetes.NewForConfigOrDie(cfg))
	}
	return f, nil
}

// Down takes the cluster down (k1m cleanup unmounts the etcd disk, which
// lies under the data root).
func (f *Fixture) Down(ctx context.Context) error { return f.H.Down(ctx) }

// etcdDir is server n's durable etcd directory (k1m server's layout).
func etcdDir(n localcluster.Node) string { return filepath.Join(n.DataDir, "etcd") }

// mountEtcdDisk mounts a tmpfs of size at server n's durable etcd
// directory before the server first starts.
func mountEtcdDisk(n localcluster.Node, size string) error {
	dir := etcdDir(n)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		return fmt.Errorf("mounting a %s tmpfs at %s: %w", size, dir, err)
	}
	return nil
}

// Client is a client of server i's API server (5 s timeout).
func (f *Fixture) Client(i int) kubernetes.Interface { return f.clients[i-1] }

// ServerNode is server i's node name.
func (f *Fixture) ServerNode(i int) string { return f.H.Server(i).Name }

// NodeNames are every node's name.
func (f *Fixture) NodeNames() []string { return f.H.Plan().NodeNames() }

// serverAddrs are the addresses of the servers but skip.
func (f *Fixture) serverAddrs(skip int) []netip.Addr {
	var out []netip.Addr
	for i := 1; i <= Servers; i++ {
		if i != skip {
			out = append(out, f.H.Server(i).Addr)
		}
	}
	return out
}

// markOut records server i as out, its node excused.
func (f *Fixture) markOut(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out[i] = true
	f.excused[f.ServerNode(i)] = true
}

// markBack records server i as back; its node stays excused until every
// node is Ready again (clearExcused).
func (f *Fixture) markBack(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.out, i)
}

func (f *Fixture) clearExcused() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.excused = map[string]bool{}
}

// view is the fixture's state at one moment, for the monitor.
type view struct {
	majority bool
	trusted  map[int]bool
	excused  map[string]bool
}

func (f *Fixture) now() view {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := view{majority: Servers-len(f.out) > Servers/2, trusted: map[int]bool{}, excused: map[string]bool{}}
	for i := 1; i <= Servers; i++ {
		v.trusted[i] = !f.out[i]
	}
	for n := range f.excused {
		v.excused[n] = true
	}
	return v
}

func (f *Fixture) logf(format string, args ...any) {
	fmt.Fprintf(f.opts.Out, "faults: "+strings.TrimSuffix(format, "\n")+"\n", args...)
}
