// Package constants is the one home of the facts several parts of k1m
// must agree on (kind's pkg/cluster/constants is the model): what goes to
// the no-fsync etcd, where the server keeps the administrator's
// kubeconfig, and the default address ranges. The server, the kind node
// image, the benchmarks and the tests all read them from here.
package constants

import (
	"strings"
)

// EtcdDefaultQuotaBytes is the durable etcd's default quota: etcd's own
// 2 GiB is raised because Leases of many nodes churn revisions fast, and
// kube-apiserver compacts only every 5 minutes.
const EtcdDefaultQuotaBytes = 8 << 30

// NoFsyncResources are the resources k1m keeps in the no-fsync etcd, in
// kube-apiserver's --etcd-servers-overrides spelling (group/resource; the
// core group is empty). They are rewritten all the time (a Lease every
// renew interval per node, an Event for everything) and are worthless
// after a crash that loses the last seconds. "/events" covers
// events.k8s.io too: both are one storage resource.
var NoFsyncResources = []string{"/events", "coordination.k8s.io/leases"}

// EtcdServersOverrides is kube-apiserver's --etcd-servers-overrides value
// that puts every no-fsync resource on the etcd at urls (the members of
// one cluster, kube-apiserver's ";" list).
func EtcdServersOverrides(urls ...string) string {
	parts := make([]string, len(NoFsyncResources))
	for i, r := range NoFsyncResources {
		parts[i] = r + "#" + strings.Join(urls, ";")
	}
	return strings.Join(parts, ",")
}

// StorePartition is a resource a server can keep in an etcd raft group of
// its own (--etcd-partitions) instead of the durable etcd: the resources
// that grow with the nodes, so that one filling its quota leaves writes
// to the others working, and each group's database stays under its
// quota at a size where the one store would not.
type StorePartition struct {
	// Name is its name on the command line: pods.
	Name string
	// Resource is its --etcd-servers-overrides spelling: /pods.
	Resource string
	// PortOffset puts its members' client port at --etcd-port plus this
	// (the peer port is one more): 2383 for pods with the defaults.
	PortOffset int
	// KeyPrefix is where kube-apiserver keeps its objects in etcd.
	KeyPrefix string
	// Movable: a running cluster can move the resource into its partition
	// (k1m etcd-partitions migrate), its writes refused meanwhile. Servers
	// write ConfigMaps and Secrets as they start, so those partitions are
	// set when a cluster is made.
	Movable bool
}

// StorePartitions are the resources that can have a partition, in the
// order servers start them and record them. Leases and Events are not
// here: they are the no-fsync store's.
var StorePartitions = []StorePartition{
	{Name: "pods", Movable: true, Resource: "/pods", PortOffset: 4, KeyPrefix: "/registry/pods/"},
	{Name: "nodes", Movable: true, Resource: "/nodes", PortOffset: 6, KeyPrefix: "/registry/minions/"},
	{Name: "endpointslices", Movable: true, Resource: "discovery.k8s.io/endpointslices", PortOffset: 8, KeyPrefix: "/registry/endpointslices/"},
	{Name: "configmaps", Resource: "/configmaps", PortOffset: 10, KeyPrefix: "/registry/configmaps/"},
	{Name: "secrets", Resource: "/secrets", PortOffset: 12, KeyPrefix: "/registry/secrets/"},
}

// StorePartitionNamed is the partition of that name.
func StorePartitionNamed(name string) (StorePartition, bool) {
	for _, p := range StorePartitions {
		if p.Name == name {
			return p, true
		}
	}
	return StorePartition{}, false
}

// StorePartitionNames are the names of StorePartitions.
func StorePartitionNames() []string {
	names := make([]string, len(StorePartitions))
	for i, p := range StorePartitions {
		names[i] = p.Name
	}
	return names
}

// MovableStorePartitionNames are the names of the Movable StorePartitions.
func MovableStorePartitionNames() []string {
	var names []string
	for _, p := range StorePartitions {
		if p.Movable {
			names = append(names, p.Name)
		}
	}
	return names
}

// Override is kube-apiserver's --etcd-servers-overrides entry
// that puts the partition's resource on the etcd members at urls.
func (p StorePartition) Override(urls ...string) string {
	return p.Resource + "#" + strings.Join(urls, ";")
}

// DefaultServerDataDir is `k1m server`'s data directory unless told.
const DefaultServerDataDir = "/var/lib/k1m/server"

// AdminGroup is the group of the administrator's certificate: cluster-admin
// through the ClusterRoleBinding of the same name (manifests/), so that
// deleting the binding revokes every admin certificate.
const AdminGroup = "k1m:cluster-admins"

// KubeletServingCA names, in a server's DATA-DIR/tls, the CA that signs
// the kubelets' serving certificates (KubeletServingCA+".crt" and ".key"):
// a trust domain of its own, trusted by kube-apiserver for kubelets only.
const KubeletServingCA = "kubelet-serving-ca"

// k1m's address plan: one unique local block, fddf:4035:b500::/40, clear
// of the fd00::/64 hosts commonly use (docs/server.md).
const (
	// DefaultServiceCIDR is kube-apiserver's patched default (patch 0004)
	// and the server's --service-cidr.
	DefaultServiceCIDR = "fddf:4035:b510::/108"
	// DefaultNodeMask is the size of each node's pod range.
	DefaultNodeMask = 64
	// NodeNetwork is where `make cluster` puts its nodes.
	NodeNetwork = "fddf:4035:b520::/64"
)

// The names `make cluster` (test/localcluster) gives what it creates on the
// machine, which the integration tests look for after it is taken down:
// the bridge joining the nodes, and the network namespaces (and node
// names) of its agents (LocalAgentPrefix + index) and of its servers when
// it runs several (LocalServerPrefix + index).
const (
	LocalBridge       = "k1m-nodes"
	LocalAgentPrefix  = "k1m-node-"
	LocalServerPrefix = "k1m-server-"
)

// Ports no flag moves: the kubelet's on every node, and the loopback
// listeners of docs/security.md. The config checks refuse a flag that
// collides with one; the server checks them free before it starts.
const (
	KubeletPort           = 10250
	KubeletHealthzPort    = 10248
	KubeProxyMetricsPort  = 10249
	KubeProxyHealthzPort  = 10256
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// AgentLoadBalancerPort is where each agent's client-side load balancer
// (pkg/agent/loadbalancer) listens, on [::1] only: the agent's kubelet and
// kube-proxy reach the cluster's API servers through it (k3s's agent uses
// the same port for the same purpose). It is none of the ports above, nor
// kube-apiserver's 6443 or the etcds' 2379-2382 (the server's defaults);
// the server's own node talks to its kube-apiserver directly and runs no
// balancer, so only an agent listens here.
const AgentLoadBalancerPort = 6444

// ServerReadyPort is where every k1m server answers GET /k1m/readyz
// (pkg/readiness) on all its addresses, over TLS with kube-apiserver's
// serving certificate, to clients with a cluster client certificate only:
// its own readiness (kube-apiserver, and a write to each of its stores),
// which agents' load balancers check before sending a node's connections
// to it. Fixed, beside kube-apiserver's 6443 and the balancer's 6444, so
// that an agent finds it on every server it knows from the kubernetes
// endpoints.
const ServerReadyPort = 6445

// The kubelet's disk thresholds on every k1m node: no laxer than k3s's.
// Image garbage collection runs from ImageGCHighThresholdPercent of the
// image file system used down to ImageGCLowThresholdPercent; below
// EvictionDiskFree free (node and image file systems, and inodes) the
// kubelet evicts pods. The agent re-imports an air-gap image that image
// garbage collection deleted (airgap.Guard).
const (
	ImageGCHighThresholdPercent = 85
	ImageGCLowThresholdPercent  = 80
	EvictionDiskFree            = "5%"
	EvictionMemoryAvailable     = "100Mi"
)

// NodeRenewIntervalAnnotation is set by each node agent on its own Node:
// the renew interval its kubelet runs with. Before it changes the lease
// profile, the server reads it to know the slowest node (docs/server.md).
const NodeRenewIntervalAnnotation = "k1m.dev/node-lease-renew-interval"

// ServerBootstrapName is the kube-system ConfigMap a multi-server
// cluster's servers publish themselves in, and joining servers read
// (package join says what it holds).
const ServerBootstrapName = "k1m-server-bootstrap"

// PodRoutes says who routes each node's pod range to the node: a
// cluster-wide setting (`k1m server --pod-routes`), chosen when the cluster
// is made and published in kube-public/k1m-cluster for every node.
type PodRoutes string

// The two ways pod ranges are routed.
const (
	// PodRoutesK1m: k1m does, host-gw style. One server publishes a route
	// per node (namespace k1m-pod-routes) and every node installs the
	// others': each join is an event to every node. The default, and what
	// a cluster whose k1m-cluster predates the setting runs.
	PodRoutesK1m PodRoutes = "k1m"
	// PodRoutesProvider: the provider's network routes each node's pod
	// range to it (a cloud VPC's route table, say): no server publishes
	// routes, no node watches or installs any.
	PodRoutesProvider PodRoutes = "provider"
)

// PodRoutesValues are the valid PodRoutes, in the order errors name them.
var PodRoutesValues = []PodRoutes{PodRoutesK1m, PodRoutesProvider}

// ParsePodRoutes reads a PodRoutes; ok is false for anything but one of
// PodRoutesValues.
func ParsePodRoutes(s string) (r PodRoutes, ok bool) {
	for _, v := range PodRoutesValues {
		if s == string(v) {
			return v, true
		}
	}
	return "", false
}

// PodRoutesForms names the valid PodRoutes for an error: "k1m or provider".
func PodRoutesForms() string {
	return string(PodRoutesK1m) + " or " + string(PodRoutesProvider)
}

// kube-proxy's modes k1m runs (`--proxy-mode`): iptables, the default,
// measured better at 10,000 Services on the project's machine
// (docs/performance.md, "kube-proxy's mode"), and nftables. This kind of
// kernel has no IPVS.
const (
	ProxyModeIPTables = "iptables"
	ProxyModeNFTables = "nftables"
)

// PodRouteEventsPerSecond is `k1m server --pod-route-events-per-second`'s
// default: the route events a second, summed over the nodes, the route
// publisher's writes may send (each route written is an event to every
// node's watch of the routes). It is what its floor of 5 routes a second
// sends at 20,000 nodes. Against 2,500, routes that keep up with a join
// burst reach the joining nodes in their first list rather than as an
// event each: the registration to the last route ended 2.3x sooner at
// 0.59x the CPU per node (docs/performance/2026-12-02-route-events).
const PodRouteEventsPerSecond = 100_000

// DNSNodesPerReplica is `k1m server --dns-nodes-per-replica`'s default:
// CoreDNS runs one replica per this many nodes, and at least two
// (pkg/dnsscale). docs/performance.md, "Large-cluster defaults", has the
// measurement that chose it.
const DNSNodesPerReplica = 100

// The packaged components a server deploys, by the names --disable takes
// (k3s's names): each is one manifest in manifests/.
const (
	ComponentLocalStorage  = "local-storage"
	ComponentMetricsServer = "metrics-server"
	ComponentNetworkPolicy = "network-policy"
)

// Components lists the packaged components --disable can leave out.
var Components = []string{ComponentLocalStorage, ComponentMetricsServer, ComponentNetworkPolicy}

// DefaultLocalStoragePath is where the local-path provisioner makes a
// node's volumes unless --default-local-storage-path says otherwise.
const DefaultLocalStoragePath = "/var/lib/k1m/storage"
