package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/pki"
)

// CompletedServer is a validated Server with every value derived from
// the flags resolved once, as kube-apiserver's Options.Complete does: the
// server reads it and never derives these again.
type CompletedServer struct {
	Server // the flags, with defaults that depend on others filled in
	// Lease is the lease profile --node-lease-renew-interval decides.
	Lease LeaseProfile
	// Routes is --pod-routes: who routes each node's pod range.
	Routes constants.PodRoutes
	// KubernetesServiceIP and DNSServiceIP are the first and tenth
	// addresses of --service-cidr.
	KubernetesServiceIP, DNSServiceIP net.IP
	// ClusterPrefix and ServicePrefix are --cluster-cidr and
	// --service-cidr, parsed and masked.
	ClusterPrefix, ServicePrefix netip.Prefix
	// PassThrough holds the parsed --COMPONENT-arg flags, by component.
	PassThrough PassThrough
	// MemoryLimitBytes is --memory-limit in bytes; 0: the sizing rule.
	MemoryLimitBytes int64
	// JoinToken is the parsed --token of a joining server (--server).
	JoinToken pki.Token
	// ExternalDurable and ExternalNoFsync are the external etcd
	// members of each store (--datastore-endpoint,
	// --no-fsync-datastore-endpoint); none: the store is embedded.
	ExternalDurable, ExternalNoFsync []string
	// Partitions are --etcd-partitions' in constants.StorePartitions'
	// order; PartitionQuotaBytes is each one's quota.
	Partitions          []constants.StorePartition
	PartitionQuotaBytes int64
	// ExternalPartitions are the external etcd members of each partition
	// by its name (--datastore-partition-endpoint), one for every
	// partition beside an external durable store; none: the partitions
	// are embedded.
	ExternalPartitions map[string][]string
	// tokenFromEnv: Token came from $K1M_TOKEN, which Complete removed
	// from the environment (RestartEnv).
	tokenFromEnv bool
}

// DefaultNoFsyncDataDir is the no-fsync etcd's directory unless
// --no-fsync-data-dir is given.
func DefaultNoFsyncDataDir(dataDir string) string { return datadir.Server(dataDir).NoFsyncEtcd() }

// Complete takes $K1M_TOKEN out of the environment (a joining server's
// --token by default), validates s, reads --token-file and resolves what
// follows from it.
func (s Server) Complete() (*CompletedServer, error) {
	env := takeTokenEnv()
	fromEnv := s.JoinServer != "" && s.Token == "" && s.TokenFile == "" && env != ""
	if fromEnv {
		s.Token = env
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	token, err := readTokenFile(s.TokenFile)
	if err != nil {
		return nil, err
	}
	if token != "" {
		s.Token = token
	}
	c := &CompletedServer{Server: s, tokenFromEnv: fromEnv}
	if c.NoFsyncDataDir == "" {
		c.NoFsyncDataDir = DefaultNoFsyncDataDir(s.DataDir)
	}
	if c.EtcdSnapshots.Dir == "" {
		c.EtcdSnapshots.Dir = DefaultSnapshotDir(s.DataDir)
	}
	// Validate checked every one of these; they cannot fail here.
	c.Lease, _ = LeaseProfileFor(s.RenewInterval)
	c.Routes, _ = constants.ParsePodRoutes(s.PodRoutes)
	c.PassThrough, _ = s.PassThrough()
	c.MemoryLimitBytes, _ = ParseMemoryLimit(s.MemoryLimit)
	if s.JoinServer != "" {
		c.JoinToken, _ = pki.ParseToken(s.Token)
	}
	c.ExternalDurable = Endpoints(s.Datastore.Endpoint)
	c.ExternalNoFsync = Endpoints(s.Datastore.NoFsyncEndpoint)
	c.Partitions = s.partitions()
	c.ExternalPartitions, _ = ParsePartitionEndpoints(s.Datastore.PartitionEndpoints)
	c.PartitionQuotaBytes = s.EtcdPartitionQuotaBytes
	if c.PartitionQuotaBytes == 0 {
		c.PartitionQuotaBytes = s.EtcdQuotaBytes
	}
	c.ServicePrefix = netip.MustParsePrefix(s.ServiceCIDR).Masked()
	c.ClusterPrefix = netip.MustParsePrefix(s.ClusterCIDR).Masked()
	c.KubernetesServiceIP = nthAddress(c.ServicePrefix, 1)
	c.DNSServiceIP = nthAddress(c.ServicePrefix, 10)
	return c, nil
}

// RestartEnv is what a start again of this process (an exec, as the
// server does to move into its own cgroup) adds to os.Environ():
// $K1M_TOKEN when the token came from it, since Complete removed it.
func (c *CompletedServer) RestartEnv() []string {
	if !c.tokenFromEnv {
		return nil
	}
	return []string{TokenEnv + "=" + c.Token}
}

// takeTokenEnv returns $K1M_TOKEN and removes it from this process's
// environment, which every child inherits: kube-controller-manager,
// kube-scheduler, containerd and what it runs, the components of the
// stock build. None of them needs the token, and each keeps its
// environment readable in /proc/PID/environ for as long as it runs. This
// is the one place k1m reads the variable; the server and the agent call
// it first thing in Complete, before anything starts.
func takeTokenEnv() string {
	token := os.Getenv(TokenEnv)
	os.Unsetenv(TokenEnv)
	return token
}

// CommandLineTokenWarning is the warning for a server token given as
// --token on the command line (token is the command line's --token, read
// before the config file; role is "server" or "agent"): every local user
// reads a process's arguments in /proc/PID/cmdline, and the server token
// opens the cluster's CA keys. "" for anything else: a join token, or no
// --token.
func CommandLineTokenWarning(role, token string) string {
	t, err := pki.ParseToken(token)
	if err != nil || !t.IsServerToken() {
		return ""
	}
	instead := "give it in --token-file FILE (mode 0600, deleted once this server has joined) or in $" + TokenEnv
	if role == "agent" {
		instead = "give agents the join token (DATA-DIR/token, or k1m token create), in --token-file FILE (mode 0600, deleted once the node has its own certificate)"
	}
	return fmt.Sprintf("k1m %s: warning: --token on the command line is a server token, which opens the cluster's CA keys, and every local user reads it in /proc/PID/cmdline (ps shows it): %s", role, instead)
}

func nthAddress(prefix netip.Prefix, n int) net.IP {
	ip := prefix.Masked().Addr()
	for i := 0; i < n; i++ {
		ip = ip.Next()
	}
	return net.IP(ip.AsSlice())
}
