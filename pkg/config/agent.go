package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/pki"
)

// Agent holds the settings of `k1m agent`. What every node must agree on
// (lease timings, cluster DNS, ranges) is not here: the agent reads it
// from the server (package join).
type Agent struct {
	ConfigFile string
	DataDir    string
	Server     string
	Token      string
	// TokenFile holds the join token for the first join; the agent deletes
	// it once the node has its own certificate.
	TokenFile string
	NodeName  string
	NodeIP    string
	ImagesDir string
	ProxyMode string
	// RunDir holds sockets and runtime state (containerd's); one per node.
	RunDir string
	// PodLogsDir is the kubelet's pod log directory. Each kubelet deletes
	// the log directories of pods it does not run, so nodes sharing one
	// machine need one each.
	PodLogsDir string
	// NodeLabels (--node-label KEY=VALUE) and NodeTaints (--node-taint
	// KEY[=VALUE]:EFFECT) are the node's at registration.
	NodeLabels []string
	NodeTaints []string
	// Pass-through flags, name=value each (package componentargs).
	KubeletArgs   []string
	KubeProxyArgs []string
	// Embedded is set by k1m server for its own node: its errors then speak
	// of the server, not of agent flags the user never gave.
	Embedded bool
	// KubeReservedMemory is the memory the kubelet keeps from pods
	// (kube-reserved): the control plane's, set by k1m server for its own
	// node; 0 on agents.
	KubeReservedMemory int64
}

// DefaultAgent returns the defaults. The token is not among them: Complete
// takes it from $K1M_TOKEN when --token is not given (read there, the
// variable is also removed there, and --help never shows its value).
func DefaultAgent() Agent {
	return Agent{ConfigFile: DefaultConfigFile, DataDir: "/var/lib/k1m/agent", ImagesDir: DefaultImagesDir, ProxyMode: constants.ProxyModeIPTables, RunDir: "/run/k1m/agent",
		PodLogsDir: DefaultPodLogsDir}
}

// AddFlags binds the settings to fs.
func (a *Agent) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&a.ConfigFile, "config", a.ConfigFile, "YAML file whose keys are these flag names; flags given on the command line win")
	fs.StringVar(&a.DataDir, "data-dir", a.DataDir, "where the agent keeps the kubelet's state, containerd's images and its certificates")
	fs.StringVar(&a.RunDir, "run-dir", a.RunDir, "where the agent keeps sockets and runtime state (under /run)")
	fs.StringVar(&a.PodLogsDir, "pod-logs-dir", a.PodLogsDir, "where the kubelet writes container logs; one per node when several share a machine")
	fs.StringVar(&a.Server, "server", a.Server, fmt.Sprintf("URL of a k1m server, e.g. https://[fddf:4035:b520::1]:6443: needed only to join; afterwards the agent follows the cluster's API servers (its load balancer on [::1]:%d) and tries this one last", constants.AgentLoadBalancerPort))
	fs.StringVar(&a.Token, "token", a.Token, "join token (k1m token create, or the server's DATA-DIR/token), needed only until the node has its own certificate (default: $K1M_TOKEN, which ps does not show)")
	fs.StringVar(&a.TokenFile, "token-file", a.TokenFile, "file holding the join token, read at the join and deleted once the node has its own certificate (no join credential stays on the machine)")
	fs.StringVar(&a.NodeName, "node-name", a.NodeName, "name of this node (default: the hostname)")
	fs.StringVar(&a.NodeIP, "node-ip", a.NodeIP, "IPv6 address of this node (default: the host's IPv6 address on its default route)")
	fs.StringVar(&a.ImagesDir, "images-dir", a.ImagesDir, "directory of image archives (*.tar) imported into containerd at start")
	fs.StringVar(&a.ProxyMode, "proxy-mode", a.ProxyMode, "kube-proxy mode: iptables or nftables")
	addNodeFlags(fs, &a.NodeLabels, &a.NodeTaints)
	addPassThroughFlags(fs, a.passThroughFlags())
}

func (a *Agent) passThroughFlags() []passThroughFlag {
	return []passThroughFlag{{componentargs.Kubelet, &a.KubeletArgs}, {componentargs.KubeProxy, &a.KubeProxyArgs}}
}

// PassThrough parses the agent's pass-through flags.
func (a *Agent) PassThrough() (PassThrough, error) { return parsePassThrough(a.passThroughFlags()) }

// ReadTokenFile sets Token from TokenFile when that file exists. A missing
// file is no error: the agent deleted it after the join, and the node
// runs on its own certificate (the agent says so if it needs a token).
func (a *Agent) ReadTokenFile() error {
	token, err := readTokenFile(a.TokenFile)
	if err != nil {
		return err
	}
	if t, _ := pki.ParseToken(token); t.IsServerToken() {
		return fmt.Errorf("--token-file %s holds a server token (DATA-DIR/server-token): it opens the cluster's CA keys and belongs on servers only; give agents the join token (DATA-DIR/token, or k1m token create)", a.TokenFile)
	}
	if token != "" {
		a.Token = token
	}
	return nil
}

// readTokenFile returns the token held in path; "" when path is empty or
// the file does not exist (deleted after the join).
func readTokenFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if _, err := pki.ParseToken(string(data)); err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	return strings.TrimSpace(string(data)), nil
}

// Validate checks every setting and reports all problems at once.
func (a *Agent) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(requireDir("--data-dir", a.DataDir))
	add(requireDir("--run-dir", a.RunDir))
	add(requirePodLogsDir(a.PodLogsDir))
	// A path cannot follow the node's requests: after the join they go
	// through the agent's load balancer, a TCP proxy to host:port.
	if u, err := url.Parse(a.Server); a.Server == "" || err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" {
		add(fmt.Errorf("--server %q: want the server's https URL, e.g. https://[fddf:4035:b520::1]:6443", a.Server))
	}
	// An empty token is fine here: a node with valid credentials of its
	// own restarts without one; the agent says so when it needs one.
	if a.Token != "" {
		if t, err := pki.ParseToken(a.Token); err != nil {
			add(err)
		} else if t.IsServerToken() {
			add(fmt.Errorf("--token is a server token (DATA-DIR/server-token): it opens the cluster's CA keys and belongs on servers only; give agents the join token (DATA-DIR/token, or k1m token create)"))
		}
	}
	if a.Token != "" && a.TokenFile != "" {
		add(fmt.Errorf("--token and --token-file are both given: give one"))
	}
	add(requireIPv6Address("--node-ip", a.NodeIP, false))
	add(requireNodeName("--node-name", a.NodeName))
	add(requireProxyMode(a.ProxyMode))
	passThrough, err := a.PassThrough()
	add(err)
	add(checkNodeFlags(a.NodeLabels, a.NodeTaints, passThrough))
	return errors.Join(errs...)
}

// DefaultPodLogsDir is the kubelet's own default pod log directory.
const DefaultPodLogsDir = "/var/log/pods"

func requirePodLogsDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("--pod-logs-dir %q: want an absolute directory path, e.g. %s", dir, DefaultPodLogsDir)
	}
	return nil
}
