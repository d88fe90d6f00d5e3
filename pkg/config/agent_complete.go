package config

import (
	"net"

	corev1 "k8s.io/api/core/v1"
	"path/filepath"
	"strconv"
	"time"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/netutil"
	"k1m.dev/k1m/pkg/pki"
)

// CompletedAgent is a validated Agent with every value derived from the
// flags resolved once, as CompletedServer is for the server: the agent
// reads it and never derives these again.
type CompletedAgent struct {
	// The flags, with Token read from --token-file when that file exists,
	// and NodeName and NodeIP resolved: the hostname (lowercased) and the
	// host's address on its IPv6 default route unless given.
	Agent
	// JoinToken is the parsed Token; zero when there is none (a node that
	// restarts on its own certificate needs none).
	JoinToken pki.Token
	// PassThrough holds the parsed --COMPONENT-arg flags, by component.
	PassThrough PassThrough
	// Paths lays out the node's files under --data-dir and --run-dir.
	Paths AgentPaths
	// BalancerListen is where the node's client-side load balancer
	// listens; empty on the server's own node, which runs none: it talks
	// to its local kube-apiserver over [::1].
	BalancerListen string
	// APIServerURL is the URL every kubeconfig of the node names: the load
	// balancer's, or --server on the server's own node. Only the join
	// itself uses --server on an agent.
	APIServerURL string
	// CgroupRoot is the node's own cgroup: several nodes may share a
	// machine.
	CgroupRoot string
	// Timings are the node agent's waits; no flag sets them.
	Timings AgentTimings
	// Labels and Taints are --node-label's and --node-taint's, parsed:
	// the kubelet registers the Node with them.
	Labels map[string]string
	Taints []corev1.Taint
}

// AgentTimings are how long the node agent waits for what it starts.
type AgentTimings struct {
	// TLSBootstrap bounds the wait for the kubelet's client certificate
	// at a join: its CSR waits for k1m's approver and then for
	// kube-controller-manager's signer.
	TLSBootstrap time.Duration
	// ComponentsStop bounds the wait for the kubelet and kube-proxy to
	// return when the agent restarts for a new lease profile.
	ComponentsStop time.Duration
	// ImageGuard is how often the agent checks that containerd still has
	// every air-gap image.
	ImageGuard time.Duration
}

// AgentPaths are the files of one node, under its data and run
// directories.
type AgentPaths struct {
	// CAFile is the cluster CA kept at the join.
	CAFile string
	// KubeletRoot is the kubelet's --root-dir, KubeletPKI its --cert-dir.
	KubeletRoot, KubeletPKI string
	KubeletConfig           string
	// KubeletClientCert and KubeletServingCert are the certificates the
	// kubelet rotates (certificate and key in one file each).
	KubeletClientCert, KubeletServingCert string
	// BootstrapKubeconfig holds the join token while the node joins;
	// KubeletKubeconfig is the one the kubelet writes with its own
	// certificate.
	BootstrapKubeconfig, KubeletKubeconfig string
	// ContainerdRoot is containerd's persistent state, ContainerdState
	// its runtime state (under the run directory).
	ContainerdRoot, ContainerdState, ContainerdLog string
	// CNIConfDir, CNIIPAMDir: the node's own (the CNI plugin is k1m's);
	// CNIBinDir: the distribution's plugins.
	CNIConfDir, CNIIPAMDir, CNIBinDir string
	// LoadBalancerState keeps the API servers the cluster published last
	// (pkg/agent/loadbalancer).
	LoadBalancerState string
}

// NewAgentPaths lays out a node's files under dataDir and runDir.
func NewAgentPaths(dataDir, runDir string) AgentPaths {
	data := func(elem ...string) string { return filepath.Join(append([]string{dataDir}, elem...)...) }
	pkiDir := data("kubelet-pki")
	return AgentPaths{
		CAFile:              data("ca.crt"),
		KubeletRoot:         data("kubelet"),
		KubeletPKI:          pkiDir,
		KubeletConfig:       data("kubelet-config.yaml"),
		KubeletClientCert:   filepath.Join(pkiDir, "kubelet-client-current.pem"),
		KubeletServingCert:  filepath.Join(pkiDir, "kubelet-server-current.pem"),
		BootstrapKubeconfig: data("bootstrap.kubeconfig"),
		KubeletKubeconfig:   data("kubelet.kubeconfig"),
		ContainerdRoot:      data("containerd"),
		ContainerdState:     filepath.Join(runDir, "containerd"),
		ContainerdLog:       data("containerd.log"),
		CNIConfDir:          data("cni", "net.d"),
		CNIIPAMDir:          data("cni", "ipam"),
		CNIBinDir:           "/usr/lib/cni",
		LoadBalancerState:   data("apiservers.json"),
	}
}

// Complete takes $K1M_TOKEN (--token's default) out of the environment,
// validates a, reads --token-file and resolves what follows from the
// flags. The node's name and address, unless given, come from the host:
// its hostname and its IPv6 default route.
func (a Agent) Complete() (*CompletedAgent, error) {
	// $K1M_TOKEN is --token's default: given --token-file, it is not
	// used. The server's own node starts on the certificate its server
	// gives it, never on a token from the environment.
	if env := takeTokenEnv(); a.Token == "" && a.TokenFile == "" && !a.Embedded {
		a.Token = env
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if err := a.ReadTokenFile(); err != nil {
		return nil, err
	}
	var err error
	a.NodeName, a.NodeIP, err = netutil.NodeIdentity(a.NodeName, a.NodeIP)
	if err != nil {
		return nil, err
	}
	c := &CompletedAgent{Agent: a, Paths: NewAgentPaths(a.DataDir, a.RunDir), CgroupRoot: "/k1m/" + a.NodeName,
		Timings: AgentTimings{TLSBootstrap: 3 * time.Minute, ComponentsStop: 10 * time.Second, ImageGuard: 30 * time.Second}}
	// Validate and ReadTokenFile checked these; they cannot fail here.
	c.PassThrough, _ = a.PassThrough()
	if a.Token != "" {
		c.JoinToken, _ = pki.ParseToken(a.Token)
	}
	c.BalancerListen, c.APIServerURL = balancerAddresses(a)
	c.Labels, _ = parseNodeLabels("--node-label", a.NodeLabels)
	c.Taints, _ = parseNodeTaints("--node-taint", a.NodeTaints)
	return c, nil
}

// balancerAddresses are where the node's load balancer listens and the
// URL the node's kubeconfigs name: the balancer's, on [::1] (the address
// every kube-apiserver serving certificate names); on the server's own
// node, which runs no balancer, --server.
func balancerAddresses(a Agent) (listen, apiServerURL string) {
	if a.Embedded {
		return "", a.Server
	}
	listen = net.JoinHostPort("::1", strconv.Itoa(constants.AgentLoadBalancerPort))
	return listen, "https://" + listen
}
