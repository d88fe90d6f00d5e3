package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/schedulerconfig"
)

// k1m's default address plan: one unique local block, fddf:4035:b500::/40,
// clear of the fd00::/64 hosts commonly use (docs/server.md).
// The cluster CIDR and node IPAM's limit depend on the build (pkg/flavor).
const (
	DefaultServiceCIDR = constants.DefaultServiceCIDR
	DefaultNodeMask    = constants.DefaultNodeMask
	DefaultClusterCIDR = flavor.DefaultClusterCIDR
	MaxNodeMaskBits    = flavor.MaxNodeMaskBits
)

// Server holds the settings of `k1m server`.
type Server struct {
	ConfigFile       string
	DataDir          string
	NoFsyncDataDir   string
	BindAddress      string
	AdvertiseAddress string
	HTTPSPort        int
	EtcdPort         int
	NoFsyncEtcdPort  int
	ClusterCIDR      string
	ServiceCIDR      string
	ClusterDomain    string
	// PodRoutes says who routes each node's pod range to it, k1m or the
	// provider's network (constants.PodRoutes): a cluster-wide setting.
	PodRoutes string
	// PodRouteEventsPerSecond paces the route publisher's writes: route
	// events a second summed over the nodes (pkg/podnet).
	PodRouteEventsPerSecond int
	RenewInterval           time.Duration
	Token                   string
	// TokenFile holds a joining server's server token for its join; the
	// server deletes it once it has joined.
	TokenFile string
	// ClusterInit starts the first server of a multi-server cluster
	// (or turns a lone server's data into it); JoinServer joins a server
	// to the cluster of the server at that URL.
	ClusterInit bool
	JoinServer  string
	// DisableEtcd runs no etcd here: kube-apiserver (and the elected
	// controller-manager and scheduler) over the cluster's members.
	DisableEtcd bool
	// Datastore puts either store in an external etcd.
	Datastore    Datastore
	DisableAgent bool
	NodeName     string
	NodeIP       string
	// NodeLabels and NodeTaints are the server's own node's at
	// registration (as an agent's --node-label and --node-taint).
	NodeLabels []string
	NodeTaints []string
	ImagesDir  string
	ProxyMode  string
	// DNSNodesPerReplica is the nodes per CoreDNS replica (pkg/dnsscale);
	// 0 leaves CoreDNS's replicas as they are set.
	DNSNodesPerReplica int
	// SchedulerPercentageOfNodesToScore is kube-scheduler's
	// percentageOfNodesToScore (pkg/schedulerconfig); 0: upstream's
	// adaptive default.
	SchedulerPercentageOfNodesToScore int
	// PodLogsDir is the node agent's pod log directory (as an agent's):
	// one per server when several share a machine.
	PodLogsDir string
	// Disable names packaged components (constants.Components) the
	// server does not deploy, and deletes if an earlier start did.
	Disable []string
	// DefaultLocalStoragePath is the directory on every node the default
	// StorageClass's volumes are made in.
	DefaultLocalStoragePath string
	// SecretsEncryption encrypts Secrets at rest (aescbc) with the key set
	// kept in DATA-DIR/tls/secrets-encryption-keys.json.
	SecretsEncryption bool
	Audit             Audit
	// EtcdQuotaBytes is the durable etcd's quota (its NOSPACE alarm).
	EtcdQuotaBytes int64
	// NoFsyncQuotaBytes is the no-fsync etcd's (0: the default, 8 GiB):
	// its Events outgrow 8 GiB past about 42,000 nodes at 30 pods a node.
	NoFsyncQuotaBytes int64
	// EtcdPartitions names the resources kept in etcd groups of their
	// own (constants.StorePartitions), each with the quota
	// EtcdPartitionQuotaBytes (0: EtcdQuotaBytes). A cluster-wide
	// setting, fixed when the cluster is made.
	EtcdPartitions          []string
	EtcdPartitionQuotaBytes int64
	EtcdSnapshots           EtcdSnapshots
	ClusterReset            ClusterReset
	// MemoryLimit is the control plane's memory, a quantity such as 6Gi;
	// empty: the sizing rule (docs/operations.md).
	MemoryLimit string
	// Pass-through flags, name=value each (package componentargs).
	KubeAPIServerArgs         []string
	KubeControllerManagerArgs []string
	KubeSchedulerArgs         []string
	KubeletArgs               []string
	KubeProxyArgs             []string
}

// Audit is kube-apiserver's audit log: off unless a path is given.
type Audit struct {
	PolicyFile string
	LogPath    string
	MaxAge     int // days
	MaxBackup  int // files
	MaxSize    int // MB
}

// DefaultServer returns the defaults.
func DefaultServer() Server {
	return Server{
		ConfigFile:                        DefaultConfigFile,
		DataDir:                           constants.DefaultServerDataDir,
		BindAddress:                       "::",
		HTTPSPort:                         6443,
		EtcdPort:                          2379,
		NoFsyncEtcdPort:                   2381,
		ClusterCIDR:                       DefaultClusterCIDR,
		ServiceCIDR:                       DefaultServiceCIDR,
		ClusterDomain:                     "cluster.local",
		PodRoutes:                         string(constants.PodRoutesK1m),
		PodRouteEventsPerSecond:           constants.PodRouteEventsPerSecond,
		RenewInterval:                     DefaultRenewInterval,
		ImagesDir:                         DefaultImagesDir,
		ProxyMode:                         constants.ProxyModeIPTables,
		DNSNodesPerReplica:                constants.DNSNodesPerReplica,
		SchedulerPercentageOfNodesToScore: flavor.SchedulerPercentageOfNodesToScore,
		PodLogsDir:                        DefaultPodLogsDir,
		DefaultLocalStoragePath:           constants.DefaultLocalStoragePath,
		// k3s's audit log rotation defaults.
		Audit:          Audit{MaxAge: 30, MaxBackup: 10, MaxSize: 100},
		EtcdQuotaBytes: constants.EtcdDefaultQuotaBytes,
		EtcdSnapshots:  defaultEtcdSnapshots(),
	}
}

// AddFlags binds the settings to fs.
func (s *Server) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.ConfigFile, "config", s.ConfigFile, "YAML file whose keys are these flag names; flags given on the command line win")
	fs.StringVar(&s.DataDir, "data-dir", s.DataDir, "where the server keeps its PKI, the durable etcd and its state")
	fs.StringVar(&s.NoFsyncDataDir, "no-fsync-data-dir", s.NoFsyncDataDir, "data directory of the no-fsync etcd holding Events and Leases (default DATA-DIR/etcd-nofsync; may be a tmpfs)")
	fs.StringVar(&s.BindAddress, "bind-address", s.BindAddress, "IPv6 address kube-apiserver listens on")
	fs.StringVar(&s.AdvertiseAddress, "advertise-address", s.AdvertiseAddress, "IPv6 address the cluster reaches kube-apiserver at (default: the node IP)")
	fs.IntVar(&s.HTTPSPort, "https-listen-port", s.HTTPSPort, "kube-apiserver's port")
	fs.IntVar(&s.EtcdPort, "etcd-port", s.EtcdPort, "client port of the durable etcd (peer port is this + 1), on [::1]")
	fs.IntVar(&s.NoFsyncEtcdPort, "no-fsync-etcd-port", s.NoFsyncEtcdPort, "client port of the no-fsync etcd (peer port is this + 1), on [::1]")
	fs.StringVar(&s.ClusterCIDR, "cluster-cidr", s.ClusterCIDR, "IPv6 range pods get their addresses from, cut into /64 node ranges")
	fs.StringVar(&s.ServiceCIDR, "service-cidr", s.ServiceCIDR, "IPv6 range of Service cluster IPs, /108 or smaller")
	fs.StringVar(&s.ClusterDomain, "cluster-domain", s.ClusterDomain, "DNS domain of the cluster")
	fs.StringVar(&s.PodRoutes, "pod-routes", s.PodRoutes, "who routes each node's pod range to it, the same on every server of a cluster: k1m (the servers publish a route per node and every node installs the others') or provider (the provider's network routes each node's range to the node's address; nodes install no routes)")
	fs.IntVar(&s.PodRouteEventsPerSecond, "pod-route-events-per-second", s.PodRouteEventsPerSecond, "with --pod-routes=k1m, the route events a second, summed over the nodes, that the route publisher's writes may send: each route written is an event to every node, so it writes this over the node count routes a second, from 5 to 200")
	fs.DurationVar(&s.RenewInterval, "node-lease-renew-interval", s.RenewInterval, "how often kubelets renew their node Lease; the lease duration (4x) and the controller-manager's grace period (5x) follow from it")
	fs.StringVar(&s.Token, "token", s.Token, "join token agents present (default: generated once and kept in DATA-DIR/token); with --server, the cluster's server token to join with (a server's DATA-DIR/server-token; default $K1M_TOKEN, which ps does not show; or --token-file)")
	fs.StringVar(&s.TokenFile, "token-file", s.TokenFile, "with --server: file holding the cluster's server token, read at the join and deleted once this server has joined (the token stays only in DATA-DIR/server-token)")
	fs.BoolVar(&s.ClusterInit, "cluster-init", s.ClusterInit, "start the first server of a multi-server cluster: its etcds serve other servers on the node IP (peer TLS); on a lone server's data, turns it into the first of several")
	fs.BoolVar(&s.DisableEtcd, "disable-etcd", s.DisableEtcd, "run no etcd on this server: kube-apiserver, the controller-manager and the scheduler over the cluster's etcd members (an API-server-only server, to add API servers without raft members; needs --server)")
	fs.StringVar(&s.JoinServer, "server", s.JoinServer, "join this server to the cluster of the server at this URL, e.g. https://[fddf:4035:b520::1:1]:6443 (needs --token; needed only for the first start)")
	fs.BoolVar(&s.DisableAgent, "disable-agent", s.DisableAgent, "run only the control plane, no kubelet on this machine")
	fs.StringVar(&s.NodeName, "node-name", s.NodeName, "name of this machine's node (default: the hostname)")
	addNodeFlags(fs, &s.NodeLabels, &s.NodeTaints)
	fs.StringVar(&s.NodeIP, "node-ip", s.NodeIP, "IPv6 address of this node (default: the host's IPv6 address on its default route)")
	fs.StringVar(&s.ImagesDir, "images-dir", s.ImagesDir, "directory of image archives (*.tar) the node agent imports into containerd at start")
	fs.StringVar(&s.ProxyMode, "proxy-mode", s.ProxyMode, "kube-proxy mode of the node agent: iptables or nftables")
	fs.IntVar(&s.DNSNodesPerReplica, "dns-nodes-per-replica", s.DNSNodesPerReplica, "CoreDNS runs one replica per this many nodes, and at least 2 (the server holding the Lease kube-system/k1m-dns-scaler sets them once a minute); 0 leaves its replicas as they are set")
	fs.IntVar(&s.SchedulerPercentageOfNodesToScore, "scheduler-percentage-of-nodes-to-score", s.SchedulerPercentageOfNodesToScore, "kube-scheduler's percentageOfNodesToScore: the share of the nodes, 1 to 100, each pod is filtered and scored against once that many fit (at least 100 nodes); 0 is upstream's adaptive default (50% less 1% per 125 nodes, at least 5%)")
	fs.StringVar(&s.PodLogsDir, "pod-logs-dir", s.PodLogsDir, "where the node agent's kubelet writes container logs; one per server when several share a machine (each kubelet deletes the logs of pods it does not run)")
	fs.StringSliceVar(&s.Disable, "disable", s.Disable, "packaged components not to deploy, and to delete if deployed, comma separated: "+strings.Join(constants.Components, ", ")+"; the same on every server of a cluster")
	fs.StringVar(&s.DefaultLocalStoragePath, "default-local-storage-path", s.DefaultLocalStoragePath, "directory on every node the default StorageClass (local-path) makes volumes in; the same on every server of a cluster")
	fs.BoolVar(&s.SecretsEncryption, "secrets-encryption", s.SecretsEncryption, "encrypt Secrets at rest (aescbc) with a key set kept in DATA-DIR/tls/secrets-encryption-keys.json (mode 0600; k1m secrets-encrypt rotates it)")
	fs.StringVar(&s.Audit.PolicyFile, "audit-policy-file", s.Audit.PolicyFile, "kube-apiserver audit policy (default with --audit-log-path: metadata of every request)")
	fs.StringVar(&s.Audit.LogPath, "audit-log-path", s.Audit.LogPath, "file kube-apiserver writes its audit log to (default: no audit log)")
	fs.IntVar(&s.Audit.MaxAge, "audit-log-maxage", s.Audit.MaxAge, "days to keep rotated audit log files")
	fs.IntVar(&s.Audit.MaxBackup, "audit-log-maxbackup", s.Audit.MaxBackup, "rotated audit log files to keep")
	fs.IntVar(&s.Audit.MaxSize, "audit-log-maxsize", s.Audit.MaxSize, "megabytes an audit log file grows to before it is rotated")
	fs.Int64Var(&s.EtcdQuotaBytes, "etcd-quota-backend-bytes", s.EtcdQuotaBytes, "size of the durable etcd's database at which it raises its NOSPACE alarm and refuses writes")
	fs.Int64Var(&s.NoFsyncQuotaBytes, "no-fsync-quota-backend-bytes", s.NoFsyncQuotaBytes, "size of the no-fsync etcd's database (Events and Leases) at which it raises its NOSPACE alarm and refuses writes, Lease renewals included (default 8 GiB)")
	fs.StringSliceVar(&s.EtcdPartitions, "etcd-partitions", s.EtcdPartitions, "resources kept each in an etcd raft group of its own beside the durable etcd, comma separated, some of "+strings.Join(constants.StorePartitionNames(), ", ")+" (members on --etcd-port plus 4, 6, 8, 10, 12 in that order); the same on every server, set when the cluster is made")
	fs.Int64Var(&s.EtcdPartitionQuotaBytes, "etcd-partition-quota-backend-bytes", s.EtcdPartitionQuotaBytes, "size of each partition's database at which it raises its NOSPACE alarm and refuses writes (default: --etcd-quota-backend-bytes)")
	fs.StringVar(&s.MemoryLimit, "memory-limit", s.MemoryLimit, "memory of the control plane (this process and what it starts but pods), e.g. 6Gi; the node agent's kubelet reserves it (default: the cgroup's limit, else a quarter of the machine, at least 2Gi, when the server runs a node agent)")
	s.Datastore.addFlags(fs)
	s.EtcdSnapshots.addFlags(fs)
	s.ClusterReset.addFlags(fs)
	AddRenamedFlags(fs)
	addPassThroughFlags(fs, s.passThroughFlags())
}

// PassThrough holds the parsed pass-through flags of every component, by
// component name.
type PassThrough map[string][]componentargs.Arg

// passThroughFlag ties a component to the values of its flag.
type passThroughFlag struct {
	component componentargs.Component
	values    *[]string
}

func (s *Server) passThroughFlags() []passThroughFlag {
	return []passThroughFlag{
		{componentargs.APIServer, &s.KubeAPIServerArgs}, {componentargs.ControllerManager, &s.KubeControllerManagerArgs},
		{componentargs.Scheduler, &s.KubeSchedulerArgs}, {componentargs.Kubelet, &s.KubeletArgs}, {componentargs.KubeProxy, &s.KubeProxyArgs},
	}
}

// addPassThroughFlags adds one repeatable --COMPONENT-arg flag per entry.
func addPassThroughFlags(fs *pflag.FlagSet, flags []passThroughFlag) {
	for _, f := range flags {
		fs.StringArrayVar(f.values, strings.TrimPrefix(f.component.Flag, "--"), *f.values, "extra "+f.component.Name+" flag, name=value (repeatable); a flag k1m sets itself is refused")
	}
}

// PassThrough parses the server's pass-through flags.
func (s *Server) PassThrough() (PassThrough, error) { return parsePassThrough(s.passThroughFlags()) }

func parsePassThrough(flags []passThroughFlag) (PassThrough, error) {
	out := PassThrough{}
	var errs []error
	for _, f := range flags {
		args, err := f.component.Parse(*f.values)
		if err != nil {
			errs = append(errs, err)
		}
		out[f.component.Name] = args
	}
	return out, errors.Join(errs...)
}

// Validate checks every setting and reports all problems at once, each
// naming its flag and the valid form.
func (s *Server) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(requireDir("--data-dir", s.DataDir))
	add(requireIPv6Address("--bind-address", s.BindAddress, true))
	add(requireIPv6Address("--advertise-address", s.AdvertiseAddress, false))
	add(requireIPv6Address("--node-ip", s.NodeIP, false))
	add(requireProxyMode(s.ProxyMode))
	add(requireDNSNodesPerReplica(s.DNSNodesPerReplica))
	add(requirePercentageOfNodesToScore(s.SchedulerPercentageOfNodesToScore))
	add(requireNodeName("--node-name", s.NodeName))
	add(requirePodLogsDir(s.PodLogsDir))
	add(requireComponents(s.Disable))
	add(requireLocalStoragePath(s.DefaultLocalStoragePath))
	add(s.Datastore.validate())
	portsOK := true
	for _, p := range []struct {
		flag string
		port int
	}{{"--https-listen-port", s.HTTPSPort}, {"--etcd-port", s.EtcdPort}, {"--no-fsync-etcd-port", s.NoFsyncEtcdPort}} {
		if err := requirePort(p.flag, p.port); err != nil {
			add(err)
			portsOK = false
		}
	}
	if portsOK {
		errs = append(errs, s.requireDistinctPorts()...)
	}
	add(s.requireSeparateStores())
	_, err := ParseMemoryLimit(s.MemoryLimit)
	add(err)
	cluster, err := parseIPv6CIDR("--cluster-cidr", s.ClusterCIDR, "fddf:4035:b500::/44")
	add(err)
	if err == nil && (cluster.Bits() > DefaultNodeMask || DefaultNodeMask-cluster.Bits() > MaxNodeMaskBits) {
		add(fmt.Errorf("--cluster-cidr %s: want a prefix from /%d to /%d, so that it cuts into /%d node ranges (at most 2^%d nodes), e.g. %s",
			s.ClusterCIDR, DefaultNodeMask-MaxNodeMaskBits, DefaultNodeMask, DefaultNodeMask, MaxNodeMaskBits, DefaultClusterCIDR))
	}
	service, err := parseIPv6CIDR("--service-cidr", s.ServiceCIDR, DefaultServiceCIDR)
	add(err)
	if err == nil && service.Bits() < 108 {
		add(fmt.Errorf("--service-cidr %s: want a /108 or smaller range (kube-apiserver's IPv6 limit), e.g. %s", s.ServiceCIDR, DefaultServiceCIDR))
	}
	if err == nil {
		add(requireServiceRoom(service))
	}
	if cluster.IsValid() && service.IsValid() && cluster.Overlaps(service) {
		add(fmt.Errorf("--cluster-cidr %s and --service-cidr %s overlap: pick disjoint ranges", s.ClusterCIDR, s.ServiceCIDR))
	}
	add(requireClusterDomain(s.ClusterDomain))
	add(requirePodRoutes(s.PodRoutes))
	add(requirePodRouteEvents(s.PodRouteEventsPerSecond))
	_, err = LeaseProfileFor(s.RenewInterval)
	add(err)
	add(s.validateJoin())
	add(s.Audit.validate())
	add(requireEtcdQuota(s.EtcdQuotaBytes))
	add(s.requireNoFsyncQuota())
	add(s.requirePartitions())
	add(s.EtcdSnapshots.validate())
	add(s.ClusterReset.validate())
	passThrough, err := s.PassThrough()
	add(err)
	add(checkNodeFlags(s.NodeLabels, s.NodeTaints, passThrough))
	if err == nil {
		// The flags kube-scheduler takes only from its file: their values
		// are checked here, before anything starts.
		_, err = schedulerconfig.Apply(schedulerconfig.Build(schedulerconfig.Settings{}), passThrough[componentargs.Scheduler.Name])
		add(err)
	}
	return errors.Join(errs...)
}

func requireDir(flag, dir string) error {
	if dir == "" {
		return fmt.Errorf("%s is empty: want a directory path, e.g. /var/lib/k1m/server", flag)
	}
	return nil
}

// requireComponents checks --disable's names.
func requireComponents(names []string) error {
	var errs []error
	for _, n := range names {
		if !slices.Contains(constants.Components, n) {
			errs = append(errs, fmt.Errorf("--disable %q: want packaged components, comma separated, of %s", n, strings.Join(constants.Components, ", ")))
		}
	}
	return errors.Join(errs...)
}

// requireLocalStoragePath checks --default-local-storage-path: absolute
// and clean, as the provisioner takes it on every node.
func requireLocalStoragePath(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || dir == "/" {
		return fmt.Errorf("--default-local-storage-path %q: want an absolute, clean directory path other than /, e.g. %s", dir, constants.DefaultLocalStoragePath)
	}
	return nil
}

func requireIPv6Address(flag, value string, required bool) error {
	if value == "" {
		if required {
			return fmt.Errorf("%s is empty: want an IPv6 address, e.g. ::", flag)
		}
		return nil
	}
	addr, err := netip.ParseAddr(value)
	if err != nil || !addr.Is6() || addr.Is4In6() {
		return fmt.Errorf("%s %q: want an IPv6 address (k1m is IPv6-only), e.g. :: or fddf:4035:b520::10", flag, value)
	}
	return nil
}

// DefaultImagesDir holds the image archives an installed node imports.
const DefaultImagesDir = "/var/lib/k1m/images"

// maxPodRouteEventsPerSecond bounds --pod-route-events-per-second, to
// catch a slip: it is the most routes the publisher writes a second (200)
// at 50,000 nodes.
const maxPodRouteEventsPerSecond = 10_000_000

func requirePodRouteEvents(n int) error {
	if n < 1 || n > maxPodRouteEventsPerSecond {
		return fmt.Errorf("--pod-route-events-per-second %d: want route events a second summed over the nodes, from 1 to %d, e.g. %d (the route publisher writes that over the node count routes a second, from 5 to 200)", n, maxPodRouteEventsPerSecond, constants.PodRouteEventsPerSecond)
	}
	return nil
}

func requireDNSNodesPerReplica(n int) error {
	if n < 0 {
		return fmt.Errorf("--dns-nodes-per-replica %d: want nodes per CoreDNS replica, e.g. %d, or 0 to leave its replicas as they are set", n, constants.DNSNodesPerReplica)
	}
	return nil
}

func requirePercentageOfNodesToScore(p int) error {
	if p < 0 || p > 100 {
		return fmt.Errorf("--scheduler-percentage-of-nodes-to-score %d: want a percentage from 1 to 100, e.g. 1, or 0 for upstream's adaptive default", p)
	}
	return nil
}

func requireProxyMode(mode string) error {
	if mode != constants.ProxyModeIPTables && mode != constants.ProxyModeNFTables {
		return fmt.Errorf("--proxy-mode %q: want iptables or nftables (this kind of kernel has no IPVS)", mode)
	}
	return nil
}

func requirePort(flag string, port int) error {
	if port < 1 || port > 65534 {
		return fmt.Errorf("%s %d: want a port from 1 to 65534", flag, port)
	}
	return nil
}

func parseIPv6CIDR(flag, value, example string) (netip.Prefix, error) {
	prefix, err := netip.ParsePrefix(value)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s %q: want an IPv6 range in CIDR notation, e.g. %s", flag, value, example)
	}
	if !prefix.Addr().Is6() || prefix.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%s %s is IPv4: k1m is IPv6-only, give an IPv6 range such as %s", flag, value, example)
	}
	if prefix.Masked() != prefix {
		return netip.Prefix{}, fmt.Errorf("%s %s has host bits set: want %s", flag, value, prefix.Masked())
	}
	return prefix, nil
}

// validateJoin checks --cluster-init, --server and --token together: the
// token is the server's own secret, or with --server the cluster's full
// server token.
func (s *Server) validateJoin() error {
	switch {
	case s.DisableEtcd && s.JoinServer == "":
		return errors.New("--disable-etcd needs --server: an API-server-only server runs over the etcd members of an existing cluster, which it joins (the first server runs etcd: --cluster-init)")
	case s.DisableEtcd && s.ClusterReset.Enabled:
		return errors.New("--disable-etcd and --cluster-reset: this server has no etcd to reset; run the reset on a server that has one")
	case s.Datastore.Endpoint != "" && s.ClusterReset.Enabled:
		return errors.New("--cluster-reset and --datastore-endpoint: the durable store is the external etcd, which k1m does not reset or restore; restore it with etcd's own tools (etcdutl snapshot restore)")
	case s.ClusterInit && s.JoinServer != "":
		return errors.New("--cluster-init and --server: the first server starts the cluster (--cluster-init), the others join it (--server URL --token T): give one")
	case s.JoinServer == "" && s.TokenFile != "":
		return errors.New("--token-file needs --server: it holds the cluster's server token a joining server joins with (a lone or first server makes its own tokens; --token sets its join token's secret)")
	case s.JoinServer == "" && s.Token != "":
		return checkTokenSecret(s.Token)
	case s.JoinServer == "":
		return nil
	}
	var errs []error
	if u, err := url.Parse(s.JoinServer); err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" {
		errs = append(errs, fmt.Errorf("--server %q: want the https URL of a server of the cluster, e.g. https://[fddf:4035:b520::1:1]:6443", s.JoinServer))
	}
	errs = append(errs, s.validateJoinToken())
	return errors.Join(errs...)
}

// validateJoinToken checks a joining server's token. With --token-file
// there may be none: the server deletes the file once it has joined, and
// says so when it must join and has no token.
func (s *Server) validateJoinToken() error {
	switch {
	case s.Token != "" && s.TokenFile != "":
		return errors.New("--token and --token-file are both given: give one")
	case s.Token == "" && s.TokenFile == "":
		return fmt.Errorf("--token is empty: joining a server (--server) needs the cluster's server token (a server's DATA-DIR/server-token), in --token-file FILE or $%s", TokenEnv)
	case s.Token == "":
		return nil
	}
	if _, err := pki.ParseToken(s.Token); err != nil {
		return fmt.Errorf("%w (with --server, --token is a server's DATA-DIR/server-token)", err)
	}
	return nil
}

// TokenEnv is the environment variable a joining server or an agent reads
// its token from when --token is not given (ps shows argv to everyone).
const TokenEnv = "K1M_TOKEN"

func checkTokenSecret(token string) error {
	if err := pki.CheckSecret(token); err != nil {
		return fmt.Errorf("--token: %v (or leave it empty to have one generated)", err)
	}
	if err := pki.CheckChosenSecret(token); err != nil {
		return fmt.Errorf("--token: %v", err)
	}
	return nil
}
