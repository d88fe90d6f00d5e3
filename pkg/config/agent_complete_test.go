package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/pki"
)

const (
	testJoinToken = "K1M" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
	testCAHash    = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// joiningAgent is `k1m agent` as a node's first start runs it: every
// value the host would otherwise supply given, so that the test does not
// depend on the machine.
func joiningAgent() Agent {
	a := DefaultAgent()
	a.Server, a.Token = "https://[fddf:4035:b520::1]:6443", testJoinToken
	a.NodeName, a.NodeIP = "node-1", "fddf:4035:b520::11"
	a.KubeletArgs = []string{"v=2"}
	return a
}

// defaultAgentPaths is the layout under the default directories.
var defaultAgentPaths = AgentPaths{
	CAFile:              "/var/lib/k1m/agent/ca.crt",
	KubeletRoot:         "/var/lib/k1m/agent/kubelet",
	KubeletPKI:          "/var/lib/k1m/agent/kubelet-pki",
	KubeletConfig:       "/var/lib/k1m/agent/kubelet-config.yaml",
	KubeletClientCert:   "/var/lib/k1m/agent/kubelet-pki/kubelet-client-current.pem",
	KubeletServingCert:  "/var/lib/k1m/agent/kubelet-pki/kubelet-server-current.pem",
	BootstrapKubeconfig: "/var/lib/k1m/agent/bootstrap.kubeconfig",
	KubeletKubeconfig:   "/var/lib/k1m/agent/kubelet.kubeconfig",
	ContainerdRoot:      "/var/lib/k1m/agent/containerd",
	ContainerdState:     "/run/k1m/agent/containerd",
	ContainerdLog:       "/var/lib/k1m/agent/containerd.log",
	CNIConfDir:          "/var/lib/k1m/agent/cni/net.d",
	CNIIPAMDir:          "/var/lib/k1m/agent/cni/ipam",
	CNIBinDir:           "/usr/lib/cni",
	LoadBalancerState:   "/var/lib/k1m/agent/apiservers.json",
}

var agentTimings = AgentTimings{TLSBootstrap: 3 * time.Minute, ComponentsStop: 10 * time.Second, ImageGuard: 30 * time.Second}

func TestCompleteAgent(t *testing.T) {
	flags := joiningAgent()
	got, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	want := &CompletedAgent{
		Agent:          flags,
		JoinToken:      pki.Token{CAHash: testCAHash, Secret: "abcdef.0123456789abcdef"},
		PassThrough:    PassThrough{"kubelet": {{Name: "v", Value: "2"}}, "kube-proxy": nil},
		Paths:          defaultAgentPaths,
		BalancerListen: "[::1]:6444",
		APIServerURL:   "https://[::1]:6444",
		CgroupRoot:     "/k1m/node-1",
		Timings:        agentTimings,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("completed\n got %+v\nwant %+v", got, want)
	}
}

// The server's own node runs no balancer: its kubeconfigs name --server,
// its kube-apiserver over [::1].
func TestCompleteEmbeddedAgent(t *testing.T) {
	flags := joiningAgent()
	flags.DataDir, flags.RunDir = "/var/lib/k1m/server/agent", "/run/k1m/server-1"
	flags.Server, flags.NodeName, flags.KubeletArgs = "https://[::1]:6443", "server-1", nil
	flags.Embedded, flags.KubeReservedMemory = true, 6<<30
	got, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	want := &CompletedAgent{
		Agent:        flags,
		JoinToken:    pki.Token{CAHash: testCAHash, Secret: "abcdef.0123456789abcdef"},
		PassThrough:  PassThrough{"kubelet": nil, "kube-proxy": nil},
		Paths:        NewAgentPaths("/var/lib/k1m/server/agent", "/run/k1m/server-1"),
		APIServerURL: "https://[::1]:6443",
		CgroupRoot:   "/k1m/server-1",
		Timings:      agentTimings,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("completed\n got %+v\nwant %+v", got, want)
	}
	if got.Paths.KubeletConfig != "/var/lib/k1m/server/agent/kubelet-config.yaml" || got.Paths.ContainerdState != "/run/k1m/server-1/containerd" {
		t.Errorf("paths not under the node's directories: %+v", got.Paths)
	}
}

// --token-file is read at completion; once the node deleted it (after
// its join) the node restarts without a token.
func TestCompleteAgentReadsTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(path, []byte(testJoinToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := joiningAgent()
	flags.Token, flags.TokenFile, flags.KubeletArgs = "", path, nil
	got, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	read := flags
	read.Token = testJoinToken
	want := &CompletedAgent{
		Agent:          read,
		JoinToken:      pki.Token{CAHash: testCAHash, Secret: "abcdef.0123456789abcdef"},
		PassThrough:    PassThrough{"kubelet": nil, "kube-proxy": nil},
		Paths:          defaultAgentPaths,
		BalancerListen: "[::1]:6444",
		APIServerURL:   "https://[::1]:6444",
		CgroupRoot:     "/k1m/node-1",
		Timings:        agentTimings,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("completed\n got %+v\nwant %+v", got, want)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	got, err = flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	want.Agent, want.JoinToken = flags, pki.Token{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("completed after the token file was deleted\n got %+v\nwant %+v", got, want)
	}
}

// Completion fails with the flag named, and nothing completed.
func TestCompleteAgentErrorsNameTheFlag(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(tokenFile, []byte("nonsense"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Agent)
		want string
	}{
		{"no server", func(a *Agent) { a.Server = "" },
			`--server "": want the server's https URL, e.g. https://[fddf:4035:b520::1]:6443`},
		{"IPv4 node address", func(a *Agent) { a.NodeIP = "192.0.2.1" },
			`--node-ip "192.0.2.1": want an IPv6 address (k1m is IPv6-only), e.g. :: or fddf:4035:b520::10`},
		{"pass-through of a flag k1m sets", func(a *Agent) { a.KubeProxyArgs = []string{"proxy-mode=ipvs"} },
			`--kube-proxy-arg "proxy-mode=ipvs" collides with --proxy-mode, which k1m sets for kube-proxy itself: use --proxy-mode`},
		{"bad token file", func(a *Agent) { a.Token, a.TokenFile = "", tokenFile },
			"--token-file " + tokenFile + ": --token is not of the form K1M<64 hex digits>::<token id>.<token secret> (the server prints it and keeps it in DATA-DIR/token), " +
				"or a server token, the same followed by ::<seal> (DATA-DIR/server-token)"},
		{"both tokens", func(a *Agent) { a.TokenFile = tokenFile },
			"--token and --token-file are both given: give one"},
	} {
		a := joiningAgent()
		c.edit(&a)
		got, err := a.Complete()
		if got != nil || err == nil || err.Error() != c.want {
			t.Errorf("%s: completed %+v\n got %v\nwant %s", c.name, got, err, c.want)
		}
	}
}

// The layout is a function of the two directories alone.
func TestNewAgentPaths(t *testing.T) {
	if got := NewAgentPaths("/var/lib/k1m/agent", "/run/k1m/agent"); got != defaultAgentPaths {
		t.Errorf("paths\n got %+v\nwant %+v", got, defaultAgentPaths)
	}
}
