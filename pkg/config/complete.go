package config

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"k1m.dev/k1m/pkg/constants"
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
}

// DefaultNoFsyncDataDir is the no-fsync etcd's directory unless
// --no-fsync-data-dir is given.
func DefaultNoFsyncDataDir(dataDir string) string { return filepath.Join(dataDir, "etcd-nofsync") }

// Complete validates s and resolves what follows from it.
func (s Server) Complete() (*CompletedServer, error) {
	if s.JoinServer != "" && s.Token == "" {
		s.Token = os.Getenv(TokenEnv)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := &CompletedServer{Server: s}
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
	services := netip.MustParsePrefix(s.ServiceCIDR)
	c.KubernetesServiceIP = nthAddress(services, 1)
	c.DNSServiceIP = nthAddress(services, 10)
	return c, nil
}

func nthAddress(prefix netip.Prefix, n int) net.IP {
	ip := prefix.Masked().Addr()
	for i := 0; i < n; i++ {
		ip = ip.Next()
	}
	return net.IP(ip.AsSlice())
}
