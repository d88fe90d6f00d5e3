package localcluster

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/netutil"
	"k1m.dev/k1m/test/localcluster/network"
)

// apiPort is `k1m server`'s default --https-listen-port, which the
// cluster keeps.
const apiPort = 6443

// Role tells a server from an agent.
type Role string

const (
	Server Role = "server"
	Agent  Role = "agent"
)

// Node is one k1m process of the cluster and the node it runs.
type Node struct {
	Role  Role
	Index int // from 1, within its role
	// Name is the node's name; empty for the only server, whose node is
	// named after the machine (the server's default).
	Name string
	// Netns is the network namespace it runs in; empty: the host's.
	Netns string
	// Veth is the host end of its namespace's veth pair, a bridge port.
	Veth string
	// Addr is its node IP; the zero Addr for a lone server with no other
	// node, which keeps the server's default (the host's address).
	Addr    netip.Addr
	DataDir string
	// RunDir is the agent's --run-dir; a server picks its own
	// (/run/k1m/NODE-NAME).
	RunDir  string
	PidFile string
	LogFile string
}

// Label names the node in progress lines: "k1m server", "k1m server
// k1m-server-2", "k1m agent k1m-node-1".
func (n Node) Label() string {
	if n.Name == "" {
		return "k1m " + string(n.Role)
	}
	return "k1m " + string(n.Role) + " " + n.Name
}

// AdminKubeconfig is a server's administrator kubeconfig.
func (n Node) AdminKubeconfig() string { return datadir.Server(n.DataDir).AdminKubeconfig() }

// TokenFile is where a server keeps the cluster's join token.
func (n Node) TokenFile() string { return filepath.Join(n.DataDir, "token") }

// ServerTokenFile is where a server of several keeps the server token.
func (n Node) ServerTokenFile() string { return filepath.Join(n.DataDir, "server-token") }

// URL is a server's kube-apiserver URL, at its node IP.
func (n Node) URL() string { return "https://" + netip.AddrPortFrom(n.Addr, apiPort).String() }

// Plan is the layout of a cluster: the bridge, and every server and
// agent with its names, address and directories.
type Plan struct {
	opts    Options
	Bridge  network.Bridge
	Servers []Node
	Agents  []Node
}

// NodeNames are the names of the nodes the plan runs: every server's (a
// lone server's is the host's name, as k1m server defaults it) and every
// agent's.
func (p Plan) NodeNames() []string {
	var names []string
	for _, n := range append(append([]Node{}, p.Servers...), p.Agents...) {
		name, _, err := netutil.NodeIdentity(n.Name, "::1")
		if err == nil {
			names = append(names, name)
		}
	}
	return names
}

// The address plan in constants.NodeNetwork: the host (and a lone
// server) at ::1, agent I at ::(16+I) (::11, ::12, ...), and server I of
// several at ::1:I.
const (
	hostOffset   = 1
	agentOffset  = 16
	serverOffset = 1 << 16
)

// newPlan lays out the cluster of defaulted, valid options.
func newPlan(o Options) Plan {
	nodes := netip.MustParsePrefix(constants.NodeNetwork)
	p := Plan{opts: o, Bridge: network.Bridge{Name: constants.LocalBridge, Addr: netip.PrefixFrom(nth(nodes, hostOffset), nodes.Bits())}}
	for i := 1; i <= o.Servers; i++ {
		p.Servers = append(p.Servers, p.server(nodes, i))
	}
	for i := 1; i <= o.Nodes-o.Servers; i++ {
		name := constants.LocalAgentPrefix + strconv.Itoa(i)
		data := filepath.Join(o.DataRoot, "nodes", name)
		p.Agents = append(p.Agents, Node{Role: Agent, Index: i, Name: name, Netns: name, Veth: "veth-" + strconv.Itoa(i),
			Addr: nth(nodes, agentOffset+i), DataDir: data, RunDir: filepath.Join("/run/k1m", name),
			PidFile: filepath.Join(o.ClusterDir, name+".pid"), LogFile: filepath.Join(o.ClusterDir, name+".log")})
	}
	return p
}

// server is server i. A lone server keeps the shell harness's layout: the
// host's namespace, DATA_ROOT/server, the bridge's address as its node IP
// when there are agents. Several get a namespace each; server 1 keeps
// DATA_ROOT/server (the join token's home), server I DATA_ROOT/server-I.
func (p Plan) server(nodes netip.Prefix, i int) Node {
	file := "server"
	data := filepath.Join(p.opts.DataRoot, "server")
	if i > 1 {
		file = "server-" + strconv.Itoa(i)
		data = filepath.Join(p.opts.DataRoot, file)
	}
	n := Node{Role: Server, Index: i, DataDir: data,
		PidFile: filepath.Join(p.opts.ClusterDir, file+".pid"), LogFile: filepath.Join(p.opts.ClusterDir, file+".log")}
	switch {
	case p.opts.Servers > 1:
		n.Name = constants.LocalServerPrefix + strconv.Itoa(i)
		n.Netns, n.Veth = n.Name, "veth-server-"+strconv.Itoa(i)
		n.Addr = nth(nodes, serverOffset+i)
	case p.opts.Nodes > 1:
		n.Addr = nth(nodes, hostOffset)
	}
	return n
}

// nth is the address n after the /64 network's own.
func nth(network netip.Prefix, n int) netip.Addr {
	a := network.Masked().Addr().As16()
	binary.BigEndian.PutUint64(a[8:], binary.BigEndian.Uint64(a[8:])+uint64(n))
	return netip.AddrFrom16(a)
}

// namespaced are the nodes with a namespace of their own.
func (p Plan) namespaced() []Node {
	var out []Node
	for _, n := range append(append([]Node{}, p.Servers...), p.Agents...) {
		if n.Netns != "" {
			out = append(out, n)
		}
	}
	return out
}

// hostname is the hostname node n's processes see: its name when it has
// a network namespace of its own (a machine of its own), else the host's.
func (n Node) hostname() string {
	if n.Netns == "" {
		return ""
	}
	return n.Name
}

// namespace is node n's network namespace on the bridge.
func (p Plan) namespace(n Node) network.Namespace {
	return network.Namespace{Name: n.Netns, Veth: n.Veth, Addr: netip.PrefixFrom(n.Addr, p.Bridge.Addr.Bits())}
}

// Command is how to run one k1m process.
type Command struct {
	Netns string // network namespace; empty: the host's
	// Hostname is the hostname of a UTS namespace of its own (the node's
	// name, as on a machine of its own); empty: the host's.
	Hostname string
	Args     []string // argv, the k1m binary first
	// Env is set on top of the harness's own environment (which never
	// passes its own K1M_TOKEN on).
	Env []string
}

// ZoneLabel is the zone label key Options.Zones sets.
const ZoneLabel = "topology.kubernetes.io/zone"

// Zone is node n's zone with Options.Zones set ("" without).
func (p Plan) Zone(n Node) string {
	if p.opts.Zones == 0 {
		return ""
	}
	k := n.Index // servers first, then the agents
	if n.Role == Agent {
		k += len(p.Servers)
	}
	return "zone-" + string(rune('a'+(k-1)%p.opts.Zones))
}

// zoneLabel is the --node-label flag of node n's zone, if any (an earlier
// release may not know the flag).
func (p Plan) zoneLabel(n Node) []string {
	if zone := p.Zone(n); zone != "" && !p.opts.EarlierRelease {
		return []string{"--node-label=" + ZoneLabel + "=" + zone}
	}
	return nil
}

// StoragePath is where the cluster's nodes keep their local-path volumes.
func (p Plan) StoragePath() string { return filepath.Join(p.opts.DataRoot, "storage") }

// ServerCommand runs server i. token is the server token servers after
// the first join with; it goes in the environment, not argv: ps shows argv
// to everyone.
func (p Plan) ServerCommand(i int, token string) Command {
	n := p.Servers[i-1]
	// Its own pod log directory: the kubelets of the nodes on this machine
	// delete each other's pod logs in a shared one.
	args := []string{p.opts.K1M, "server", "--data-dir", n.DataDir, "--images-dir", p.opts.ImagesDir,
		"--pod-logs-dir", filepath.Join(n.DataDir, "pod-logs")}
	if !p.opts.EarlierRelease {
		// Volumes under the data root, which the harness removes.
		args = append(args, "--default-local-storage-path", p.StoragePath())
	}
	if n.Name != "" {
		args = append(args, "--node-name", n.Name)
	}
	args = append(args, p.zoneLabel(n)...)
	if n.Addr.IsValid() {
		args = append(args, "--node-ip", n.Addr.String())
	}
	if n.Netns != "" {
		args = append(args, "--advertise-address", n.Addr.String())
	}
	if p.opts.ServerMemory != "" {
		args = append(args, "--memory-limit", p.opts.ServerMemory)
	}
	if p.opts.PodRoutes == constants.PodRoutesProvider {
		args = append(args, "--pod-routes="+string(p.opts.PodRoutes))
	}
	var env []string
	switch {
	case p.opts.Servers > 1 && i == 1:
		args = append(args, "--cluster-init")
	case i > 1:
		args = append(args, "--server", p.Servers[0].URL())
		env = []string{"K1M_TOKEN=" + token}
	}
	return Command{Netns: n.Netns, Hostname: n.hostname(), Args: append(args, p.opts.ServerArgs...), Env: env}
}

// AgentCommand runs agent i, joining server 1 with token; without one it
// starts on the node's own certificate (a joined node needs none).
func (p Plan) AgentCommand(i int, token string) Command {
	n := p.Agents[i-1]
	args := []string{p.opts.K1M, "agent", "--server", p.Servers[0].URL(),
		"--node-name", n.Name, "--node-ip", n.Addr.String(),
		"--data-dir", n.DataDir, "--run-dir", n.RunDir, "--images-dir", p.opts.ImagesDir,
		"--pod-logs-dir", filepath.Join(n.DataDir, "pod-logs")}
	args = append(args, p.zoneLabel(n)...)
	var env []string
	if token != "" {
		env = []string{"K1M_TOKEN=" + token}
	}
	return Command{Netns: n.Netns, Hostname: n.hostname(), Args: append(args, p.opts.AgentArgs...), Env: env}
}

// serverNode is server i, or an error naming the valid range.
func (p Plan) serverNode(i int) (Node, error) {
	if i < 1 || i > len(p.Servers) {
		return Node{}, fmt.Errorf("server %d: want 1 to %d (SERVERS=%d)", i, len(p.Servers), len(p.Servers))
	}
	return p.Servers[i-1], nil
}

// agentNode is agent i, or an error naming the valid range.
func (p Plan) agentNode(i int) (Node, error) {
	if len(p.Agents) == 0 {
		return Node{}, fmt.Errorf("agent %d: this cluster has no agents (NODES=%d, SERVERS=%d: NODES-SERVERS agents)", i, p.opts.Nodes, p.opts.Servers)
	}
	if i < 1 || i > len(p.Agents) {
		return Node{}, fmt.Errorf("agent %d: want 1 to %d (NODES=%d, SERVERS=%d: NODES-SERVERS agents)", i, len(p.Agents), p.opts.Nodes, p.opts.Servers)
	}
	return p.Agents[i-1], nil
}
