package localcluster

import (
	"io"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/test/localcluster/network"
)

func newCluster(t *testing.T, o Options) *Cluster {
	t.Helper()
	o.Out = io.Discard
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// base are options with every path given, as the Makefile passes them.
func base(servers, nodes int) Options {
	return Options{Servers: servers, Nodes: nodes, K1M: "/k/k1m", ClusterDir: "/c", DataRoot: "/d", ImagesDir: "/i",
		ServerArgs: []string{"--secrets-encryption", "--node-lease-renew-interval=5s"}}
}

func TestDefaults(t *testing.T) {
	got := newCluster(t, Options{}).Options()
	want := Options{Servers: 1, Nodes: 1, K1M: "_output/bin/k1m", ClusterDir: "_output/cluster", DataRoot: "/var/lib/k1m",
		ImagesDir: "_output/images", PodRoutes: constants.PodRoutesK1m, Timeout: 300 * time.Second, Out: io.Discard}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	got = newCluster(t, Options{Servers: 3}).Options()
	if got.Nodes != 3 || got.ServerMemory != "3Gi" {
		t.Errorf("SERVERS=3: NODES=%d SERVER_MEMORY=%q, want 3 and 3Gi", got.Nodes, got.ServerMemory)
	}
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Servers: 10}, "SERVERS=10: want a number of servers from 1 to 9"},
		{Options{Servers: -1}, "SERVERS=-1: want a number of servers from 1 to 9"},
		{Options{Nodes: 100}, "NODES=100: want a number of nodes from 1 to 99"},
		{Options{Servers: 3, Nodes: 2}, "NODES=2: want at least SERVERS=3 nodes (every server is a node too; the other NODES-SERVERS are agents)"},
		{Options{ServerMemory: "3GB"}, "SERVER_MEMORY=3GB: want a size such as 3Gi, 512Mi or 3221225472 (bytes), or leave it unset"},
		{Options{Timeout: time.Millisecond}, "TIMEOUT=1ms: want at least 1 second, e.g. 300"},
		{Options{PodRoutes: "host-gw"}, "POD_ROUTES=host-gw: want k1m or provider, or leave it unset (k1m)"},
		{Options{Servers: 12, Nodes: 0, ServerMemory: "x"}, "SERVERS=12: want a number of servers from 1 to 9\n" +
			"SERVER_MEMORY=x: want a size such as 3Gi, 512Mi or 3221225472 (bytes), or leave it unset"},
	} {
		_, err := New(tc.opts)
		if err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): %v\nwant %s", tc.opts, err, tc.want)
		}
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{"SERVERS": "3", "NODES": "5", "K1M": "/k/k1m", "CLUSTER_DIR": "/c", "DATA_ROOT": "/d", "IMAGES_DIR": "/i",
		"SERVER_ARGS": " --secrets-encryption  --audit-log-path=/a ", "AGENT_ARGS": "--node-label=a=b", "SERVER_MEMORY": "2Gi", "POD_ROUTES": "provider", "TIMEOUT": "60"}
	got, err := OptionsFromEnv(func(k string) string { return env[k] })
	want := Options{Servers: 3, Nodes: 5, K1M: "/k/k1m", ClusterDir: "/c", DataRoot: "/d", ImagesDir: "/i",
		ServerArgs: []string{"--secrets-encryption", "--audit-log-path=/a"}, AgentArgs: []string{"--node-label=a=b"}, ServerMemory: "2Gi", PodRoutes: constants.PodRoutesProvider, Timeout: time.Minute}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("OptionsFromEnv: %+v, %v\nwant %+v", got, err, want)
	}
	if got, err := OptionsFromEnv(func(string) string { return "" }); err != nil || !reflect.DeepEqual(got, Options{}) {
		t.Errorf("empty environment: %+v, %v; want the zero Options (every default)", got, err)
	}
	bad := map[string]string{"SERVERS": "0", "NODES": "three", "TIMEOUT": "5m"}
	_, err = OptionsFromEnv(func(k string) string { return bad[k] })
	wantErr := "SERVERS=0: want a number of servers from 1 to 9\nNODES=three: want a number of nodes from 1 to 99\nTIMEOUT=5m: want a number of seconds, e.g. 300"
	if err == nil || err.Error() != wantErr {
		t.Errorf("bad environment: %v\nwant %s", err, wantErr)
	}
}

func TestOneServerAlone(t *testing.T) {
	c := newCluster(t, base(1, 1))
	p := c.Plan()
	want := Node{Role: Server, Index: 1, DataDir: "/d/server", PidFile: "/c/server.pid", LogFile: "/c/server.log"}
	if !reflect.DeepEqual(p.Servers, []Node{want}) || len(p.Agents) != 0 {
		t.Errorf("plan: servers %+v, agents %+v; want %+v alone", p.Servers, p.Agents, want)
	}
	wantCmd := Command{Args: []string{"/k/k1m", "server", "--data-dir", "/d/server", "--images-dir", "/i", "--pod-logs-dir", "/d/server/pod-logs", "--default-local-storage-path", "/d/storage",
		"--secrets-encryption", "--node-lease-renew-interval=5s"}}
	if got := p.ServerCommand(1, ""); !reflect.DeepEqual(got, wantCmd) {
		t.Errorf("server command:\n got %#v\nwant %#v", got, wantCmd)
	}
	checkActions(t, c, []string{"refuse a running cluster", "check that no other cluster runs", "check the disk has room for pods", "check that the data is this layout's", "record the layout",
		"start k1m server", "wait for every node Ready", "summary"})
}

// An earlier release's server gets no flag it may not know; UseK1M
// moves the next start to this release's flags.
func TestEarlierRelease(t *testing.T) {
	o := base(1, 1)
	o.EarlierRelease = true
	c := newCluster(t, o)
	want := Command{Args: []string{"/k/k1m", "server", "--data-dir", "/d/server", "--images-dir", "/i", "--pod-logs-dir", "/d/server/pod-logs",
		"--secrets-encryption", "--node-lease-renew-interval=5s"}}
	if got := c.Plan().ServerCommand(1, ""); !reflect.DeepEqual(got, want) {
		t.Errorf("earlier release's server command:\n got %#v\nwant %#v", got, want)
	}
	c.UseK1M("/k/new")
	want.Args = append([]string{"/k/new", "server", "--data-dir", "/d/server", "--images-dir", "/i", "--pod-logs-dir", "/d/server/pod-logs", "--default-local-storage-path", "/d/storage"}, want.Args[8:]...)
	if got := c.Plan().ServerCommand(1, ""); !reflect.DeepEqual(got, want) {
		t.Errorf("after UseK1M:\n got %#v\nwant %#v", got, want)
	}
}

func TestOneServerAndAgents(t *testing.T) {
	c := newCluster(t, base(1, 3))
	p := c.Plan()
	wantBridge := network.Bridge{Name: "k1m-nodes", Addr: netip.MustParsePrefix("fddf:4035:b520::1/64")}
	if p.Bridge != wantBridge {
		t.Errorf("bridge %+v, want %+v", p.Bridge, wantBridge)
	}
	wantServer := Node{Role: Server, Index: 1, Addr: netip.MustParseAddr("fddf:4035:b520::1"), DataDir: "/d/server",
		PidFile: "/c/server.pid", LogFile: "/c/server.log"}
	if !reflect.DeepEqual(p.Servers, []Node{wantServer}) {
		t.Errorf("servers %+v, want %+v", p.Servers, wantServer)
	}
	wantCmd := Command{Args: []string{"/k/k1m", "server", "--data-dir", "/d/server", "--images-dir", "/i", "--pod-logs-dir", "/d/server/pod-logs", "--default-local-storage-path", "/d/storage",
		"--node-ip", "fddf:4035:b520::1", "--secrets-encryption", "--node-lease-renew-interval=5s"}}
	if got := p.ServerCommand(1, ""); !reflect.DeepEqual(got, wantCmd) {
		t.Errorf("server command:\n got %#v\nwant %#v", got, wantCmd)
	}
	wantAgent := Node{Role: Agent, Index: 2, Name: "k1m-node-2", Netns: "k1m-node-2", Veth: "veth-2",
		Addr: netip.MustParseAddr("fddf:4035:b520::12"), DataDir: "/d/nodes/k1m-node-2", RunDir: "/run/k1m/k1m-node-2",
		PidFile: "/c/k1m-node-2.pid", LogFile: "/c/k1m-node-2.log"}
	if len(p.Agents) != 2 || !reflect.DeepEqual(p.Agents[1], wantAgent) {
		t.Errorf("agents %+v, want 2, the second %+v", p.Agents, wantAgent)
	}
	wantAgentCmd := Command{Netns: "k1m-node-1", Hostname: "k1m-node-1", Args: []string{"/k/k1m", "agent", "--server", "https://[fddf:4035:b520::1]:6443",
		"--node-name", "k1m-node-1", "--node-ip", "fddf:4035:b520::11",
		"--data-dir", "/d/nodes/k1m-node-1", "--run-dir", "/run/k1m/k1m-node-1", "--images-dir", "/i",
		"--pod-logs-dir", "/d/nodes/k1m-node-1/pod-logs"}, Env: []string{"K1M_TOKEN=K10abc::secret"}}
	if got := p.AgentCommand(1, "K10abc::secret"); !reflect.DeepEqual(got, wantAgentCmd) {
		t.Errorf("agent command:\n got %#v\nwant %#v", got, wantAgentCmd)
	}
	// Restarted with no token: none in its environment either.
	wantAgentCmd.Env = nil
	if got := p.AgentCommand(1, ""); !reflect.DeepEqual(got, wantAgentCmd) {
		t.Errorf("agent command without a token:\n got %#v\nwant %#v", got, wantAgentCmd)
	}
	wantNS := network.Namespace{Name: "k1m-node-1", Veth: "veth-1", Addr: netip.MustParsePrefix("fddf:4035:b520::11/64")}
	if got := p.namespace(p.Agents[0]); got != wantNS {
		t.Errorf("namespace %+v, want %+v", got, wantNS)
	}
	checkActions(t, c, []string{"refuse a running cluster", "check that no other cluster runs", "check the disk has room for pods", "check that the data is this layout's", "record the layout", "network",
		"start k1m server", "start k1m agent k1m-node-1", "start k1m agent k1m-node-2", "wait for every node Ready", "summary"})
}

func TestThreeServers(t *testing.T) {
	c := newCluster(t, base(3, 5))
	p := c.Plan()
	want2 := Node{Role: Server, Index: 2, Name: "k1m-server-2", Netns: "k1m-server-2", Veth: "veth-server-2",
		Addr: netip.MustParseAddr("fddf:4035:b520::1:2"), DataDir: "/d/server-2", PidFile: "/c/server-2.pid", LogFile: "/c/server-2.log"}
	if len(p.Servers) != 3 || !reflect.DeepEqual(p.Servers[1], want2) {
		t.Errorf("servers %+v, want 3, the second %+v", p.Servers, want2)
	}
	if got := []string{p.Servers[0].DataDir, p.Servers[0].PidFile, p.Servers[0].Addr.String(), p.Servers[2].Addr.String()}; !slices.Equal(got,
		[]string{"/d/server", "/c/server.pid", "fddf:4035:b520::1:1", "fddf:4035:b520::1:3"}) {
		t.Errorf("server 1's data, pid file and address, server 3's address: %q", got)
	}
	want1 := Command{Netns: "k1m-server-1", Hostname: "k1m-server-1", Args: []string{"/k/k1m", "server", "--data-dir", "/d/server", "--images-dir", "/i", "--pod-logs-dir", "/d/server/pod-logs", "--default-local-storage-path", "/d/storage",
		"--node-name", "k1m-server-1", "--node-ip", "fddf:4035:b520::1:1", "--advertise-address", "fddf:4035:b520::1:1",
		"--memory-limit", "3Gi", "--cluster-init", "--secrets-encryption", "--node-lease-renew-interval=5s"}}
	if got := p.ServerCommand(1, "ignored"); !reflect.DeepEqual(got, want1) {
		t.Errorf("server 1 command:\n got %#v\nwant %#v", got, want1)
	}
	wantCmd2 := Command{Netns: "k1m-server-2", Hostname: "k1m-server-2", Args: []string{"/k/k1m", "server", "--data-dir", "/d/server-2", "--images-dir", "/i", "--pod-logs-dir", "/d/server-2/pod-logs", "--default-local-storage-path", "/d/storage",
		"--node-name", "k1m-server-2", "--node-ip", "fddf:4035:b520::1:2", "--advertise-address", "fddf:4035:b520::1:2",
		"--memory-limit", "3Gi", "--server", "https://[fddf:4035:b520::1:1]:6443", "--secrets-encryption", "--node-lease-renew-interval=5s"},
		Env: []string{"K1M_TOKEN=K10abc::secret"}}
	if got := p.ServerCommand(2, "K10abc::secret"); !reflect.DeepEqual(got, wantCmd2) {
		t.Errorf("server 2 command:\n got %#v\nwant %#v", got, wantCmd2)
	}
	wantAgent := Command{Netns: "k1m-node-2", Hostname: "k1m-node-2", Args: []string{"/k/k1m", "agent", "--server", "https://[fddf:4035:b520::1:1]:6443",
		"--node-name", "k1m-node-2", "--node-ip", "fddf:4035:b520::12",
		"--data-dir", "/d/nodes/k1m-node-2", "--run-dir", "/run/k1m/k1m-node-2", "--images-dir", "/i",
		"--pod-logs-dir", "/d/nodes/k1m-node-2/pod-logs"}, Env: []string{"K1M_TOKEN=K10abc::secret"}}
	if got := p.AgentCommand(2, "K10abc::secret"); !reflect.DeepEqual(got, wantAgent) {
		t.Errorf("agent 2 command:\n got %#v\nwant %#v", got, wantAgent)
	}
	var names []string
	for _, n := range p.namespaced() {
		names = append(names, p.namespace(n).Name+" "+p.namespace(n).Veth+" "+p.namespace(n).Addr.String())
	}
	if want := []string{"k1m-server-1 veth-server-1 fddf:4035:b520::1:1/64", "k1m-server-2 veth-server-2 fddf:4035:b520::1:2/64",
		"k1m-server-3 veth-server-3 fddf:4035:b520::1:3/64", "k1m-node-1 veth-1 fddf:4035:b520::11/64", "k1m-node-2 veth-2 fddf:4035:b520::12/64"}; !slices.Equal(names, want) {
		t.Errorf("namespaces %q\nwant %q", names, want)
	}
	checkActions(t, c, []string{"refuse a running cluster", "check that no other cluster runs", "check the disk has room for pods", "check that the data is this layout's", "record the layout", "network",
		"start k1m server k1m-server-1", "start k1m server k1m-server-2", "start k1m server k1m-server-3",
		"start k1m agent k1m-node-1", "start k1m agent k1m-node-2", "wait for every node Ready", "summary"})
}

// With the provider's pod routes every server is started with
// --pod-routes=provider, and Up routes the nodes' ranges once they are
// Ready (and while they get them).
func TestProviderPodRoutes(t *testing.T) {
	o := base(3, 3)
	o.PodRoutes = constants.PodRoutesProvider
	c := newCluster(t, o)
	want := Command{Netns: "k1m-server-2", Hostname: "k1m-server-2", Args: []string{"/k/k1m", "server", "--data-dir", "/d/server-2", "--images-dir", "/i", "--pod-logs-dir", "/d/server-2/pod-logs", "--default-local-storage-path", "/d/storage",
		"--node-name", "k1m-server-2", "--node-ip", "fddf:4035:b520::1:2", "--advertise-address", "fddf:4035:b520::1:2",
		"--memory-limit", "3Gi", "--pod-routes=provider", "--server", "https://[fddf:4035:b520::1:1]:6443", "--secrets-encryption", "--node-lease-renew-interval=5s"},
		Env: []string{"K1M_TOKEN=K10abc::secret"}}
	if got := c.Plan().ServerCommand(2, "K10abc::secret"); !reflect.DeepEqual(got, want) {
		t.Errorf("server 2 command:\n got %#v\nwant %#v", got, want)
	}
	checkActions(t, c, []string{"refuse a running cluster", "check that no other cluster runs", "check the disk has room for pods", "check that the data is this layout's", "record the layout", "network",
		"start k1m server k1m-server-1", "start k1m server k1m-server-2", "start k1m server k1m-server-3",
		"wait for every node Ready", "route every node's pod range (the provider's router)", "summary"})
	// k1m's own routes: the harness routes nothing.
	if err := newCluster(t, base(3, 3)).RouteNodeRanges(t.Context()); err != nil {
		t.Errorf("RouteNodeRanges with k1m's pod routes: %v, want nothing done", err)
	}
}

// The router reads each node's IPv6 ranges and IPv6 InternalIP; a node
// without either yet is left for a later round.
func TestNodeRangesOf(t *testing.T) {
	out := "k1m-server-1\tfddf:4035:b500::/64\tfddf:4035:b520::1:1\n" +
		"k1m-server-2\tfddf:4035:b500:1::/64\t10.0.0.2 fddf:4035:b520::1:2\n" +
		"k1m-node-1\t\tfddf:4035:b520::11\n" +
		"k1m-node-2\tfddf:4035:b500:3::/64\t\n" +
		"k1m-node-3\t10.244.0.0/24 fddf:4035:b500:4::/64\tfddf:4035:b520::13\n"
	want := []nodeRange{
		{"k1m-server-1", netip.MustParsePrefix("fddf:4035:b500::/64"), netip.MustParseAddr("fddf:4035:b520::1:1")},
		{"k1m-server-2", netip.MustParsePrefix("fddf:4035:b500:1::/64"), netip.MustParseAddr("fddf:4035:b520::1:2")},
		{"k1m-node-3", netip.MustParsePrefix("fddf:4035:b500:4::/64"), netip.MustParseAddr("fddf:4035:b520::13")},
	}
	if got := nodeRangesOf(out); !reflect.DeepEqual(got, want) {
		t.Errorf("nodeRangesOf:\n got %+v\nwant %+v", got, want)
	}
}

func TestServerMemoryAndAgentNumbers(t *testing.T) {
	one := base(1, 1)
	one.ServerMemory = "6Gi"
	if got := newCluster(t, one).Plan().ServerCommand(1, ""); !slices.Contains(got.Args, "--memory-limit") {
		t.Errorf("a lone server given SERVER_MEMORY: %q, want --memory-limit 6Gi", got.Args)
	}
	for _, tc := range []struct {
		size string
		want int64
	}{{"3Gi", 3 << 30}, {"512Mi", 512 << 20}, {"1073741824", 1 << 30}, {"", 0}} {
		if got := (Options{ServerMemory: tc.size}).memoryBytes(); got != tc.want {
			t.Errorf("memoryBytes(%q) = %d, want %d", tc.size, got, tc.want)
		}
	}
	// The 99th agent: the hex of 16+99.
	if got := newCluster(t, base(1, 99)).Agent(98).Addr.String(); got != "fddf:4035:b520::72" {
		t.Errorf("agent 98's address %s, want fddf:4035:b520::72", got)
	}
}

func TestIndexErrors(t *testing.T) {
	c := newCluster(t, base(3, 3))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{c.StopServer(t.Context(), 4), "server 4: want 1 to 3 (SERVERS=3)"},
		{c.RestartAgent(t.Context(), 1), "agent 1: this cluster has no agents (NODES=3, SERVERS=3: NODES-SERVERS agents)"},
		{newCluster(t, base(1, 3)).RestartAgent(t.Context(), 3), "agent 3: want 1 to 2 (NODES=3, SERVERS=1: NODES-SERVERS agents)"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%v, want %s", tc.err, tc.want)
		}
	}
}

func checkActions(t *testing.T, c *Cluster, want []string) {
	t.Helper()
	var got []string
	for _, a := range c.upActions() {
		got = append(got, a.name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("up actions:\n got %q\nwant %q", got, want)
	}
}

// ZONES spreads servers, then agents, over the zones in turn, each given
// by --node-label.
func TestZones(t *testing.T) {
	o := base(3, 5)
	o.Zones = 3
	c := newCluster(t, o)
	p := c.Plan()
	var got []string
	for i := range p.Servers {
		args := p.ServerCommand(i+1, "tok").Args
		got = append(got, p.Zone(p.Servers[i])+" "+labelFlag(args))
	}
	for i := range p.Agents {
		args := p.AgentCommand(i+1, "tok").Args
		got = append(got, p.Zone(p.Agents[i])+" "+labelFlag(args))
	}
	want := []string{"zone-a --node-label=topology.kubernetes.io/zone=zone-a", "zone-b --node-label=topology.kubernetes.io/zone=zone-b",
		"zone-c --node-label=topology.kubernetes.io/zone=zone-c", "zone-a --node-label=topology.kubernetes.io/zone=zone-a",
		"zone-b --node-label=topology.kubernetes.io/zone=zone-b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("zones and flags:\n got %q\nwant %q", got, want)
	}
	if _, err := OptionsFromEnv(func(k string) string { return map[string]string{"ZONES": "27"}[k] }); err == nil || err.Error() != "ZONES=27: want a number of zones from 1 to 26" {
		t.Errorf("ZONES=27: %v", err)
	}
}

func labelFlag(args []string) string {
	for _, a := range args {
		if strings.HasPrefix(a, "--node-label=") {
			return a
		}
	}
	return ""
}
