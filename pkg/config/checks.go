package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/fsutil"
)

// requireNodeName wants a lower-case DNS-1123 subdomain, the form of a
// Node's name: the kubelet of a node named otherwise never registers, and
// the node stays NotReady forever. Empty means the hostname (lowercased).
func requireNodeName(flag, name string) error {
	if name == "" {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%s %q: want a lower-case DNS-1123 subdomain (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit), e.g. node-1", flag, name)
	}
	return nil
}

// requireClusterDomain wants a DNS domain of lower-case labels.
func requireClusterDomain(domain string) error {
	d := strings.TrimSuffix(domain, ".")
	if d == "" {
		return fmt.Errorf("--cluster-domain is empty: want a DNS domain, e.g. cluster.local")
	}
	if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
		return fmt.Errorf("--cluster-domain %q: want a DNS domain of lower-case labels, e.g. cluster.local", domain)
	}
	return nil
}

// requirePodRoutes wants one of constants.PodRoutesValues.
func requirePodRoutes(routes string) error {
	if _, ok := constants.ParsePodRoutes(routes); !ok {
		return fmt.Errorf("--pod-routes %q: want %s (k1m: the servers publish each node's route and every node installs the others'; provider: the provider's network routes each node's pod range to the node)", routes, constants.PodRoutesForms())
	}
	return nil
}

// fixedPorts are the ports a server uses that no flag moves (loopback
// listeners of docs/security.md, and the kubelet's).
var fixedPorts = []struct {
	owner string
	port  int
}{
	{"the kubelet", constants.KubeletPort}, {"the kubelet's healthz", constants.KubeletHealthzPort},
	{"kube-proxy's metrics", constants.KubeProxyMetricsPort}, {"kube-proxy's healthz", constants.KubeProxyHealthzPort},
	{"kube-controller-manager", constants.ControllerManagerPort}, {"kube-scheduler", constants.SchedulerPort},
	{"the server's readiness", constants.ServerReadyPort},
}

// portUse is a port and what listens on it.
type portUse struct {
	owner string
	port  int
}

// requireDistinctPorts wants every port the server listens on to differ:
// two listeners on one port fail at start, after files are written.
func (s *Server) requireDistinctPorts() []error {
	type use = portUse
	uses := []use{
		{"--https-listen-port", s.HTTPSPort},
		{"--etcd-port", s.EtcdPort}, {"--etcd-port (peer, +1)", s.EtcdPort + 1},
		{"--no-fsync-etcd-port", s.NoFsyncEtcdPort}, {"--no-fsync-etcd-port (peer, +1)", s.NoFsyncEtcdPort + 1},
	}
	for _, f := range fixedPorts {
		uses = append(uses, use{f.owner, f.port})
	}
	uses = append(uses, s.partitionPorts()...)
	byPort := map[int][]string{}
	for _, u := range uses {
		byPort[u.port] = append(byPort[u.port], u.owner)
	}
	ports := make([]int, 0, len(byPort))
	for p := range byPort {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	var errs []error
	for _, p := range ports {
		if owners := byPort[p]; len(owners) > 1 {
			errs = append(errs, fmt.Errorf("%s use the same port %d: every listener needs its own (each etcd also takes the port after its own)", strings.Join(owners, " and "), p))
		}
	}
	return errs
}

// requireServiceRoom wants the service range to hold the two Service IPs
// k1m hands out itself.
func requireServiceRoom(service netip.Prefix) error {
	if size := 128 - service.Bits(); size < 4 { // a /125 holds 8 addresses: too few
		return fmt.Errorf("--service-cidr %s holds %d addresses: the kubernetes Service takes the 1st and cluster DNS the 10th; want a /124 or larger, e.g. %s",
			service, 1<<size, DefaultServiceCIDR)
	}
	return nil
}

// MaxRenewInterval bounds --node-lease-renew-interval: a node is declared
// NotReady five intervals after its last renewal, so at 2 minutes a dead
// node is noticed after 10.
const MaxRenewInterval = 2 * time.Minute

// requireSeparateStores wants the no-fsync etcd's directory apart from
// the durable etcd's: one etcd in the other's directory corrupts both.
func (s *Server) requireSeparateStores() error {
	if s.NoFsyncDataDir == "" {
		return nil // DATA-DIR/etcd-nofsync
	}
	durable := filepath.Clean(datadir.Server(s.DataDir).Etcd())
	eph := filepath.Clean(s.NoFsyncDataDir)
	if eph == filepath.Clean(s.DataDir) || fsutil.Within(eph, durable) || fsutil.Within(durable, eph) {
		return fmt.Errorf("--no-fsync-data-dir %s is, holds or lies inside the durable etcd's directory %s (or is --data-dir itself): give the no-fsync etcd a directory of its own, e.g. /var/lib/k1m/etcd-nofsync", s.NoFsyncDataDir, durable)
	}
	return nil
}
