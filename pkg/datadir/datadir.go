// Package datadir names every path of a k1m server's data directory
// (--data-dir, default /var/lib/k1m/server): the layout upgrades, backups
// and operators depend on, in one place, as kubeadm's constants and k3s's
// runtime paths are. No other code joins a name onto a server's data
// directory; docs/server.md's table of the data directory lists Layout
// (TestDocsTable). The server's own node keeps its files under Agent, laid
// out as every node's (config.NewAgentPaths).
package datadir

import (
	"path/filepath"

	"k1m.dev/k1m/pkg/constants"
)

// Server is a server's data directory.
type Server string

// DefaultAdminKubeconfig is that of a server with the default data
// directory (what `k1m kubectl` uses when KUBECONFIG is unset).
var DefaultAdminKubeconfig = Server(constants.DefaultServerDataDir).AdminKubeconfig()

func (d Server) join(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// The names of the data directory's entries.
const (
	etcdName             = "etcd"
	noFsyncName          = "etcd-nofsync"
	partitionsName       = "etcd-partitions"
	legacyNoFsyncName    = "etcd-ephemeral"
	etcdSocketsName      = "etcd-sockets"
	etcdMembersName      = "etcd-members.json"
	datastoreName        = "datastore.json"
	tlsName              = "tls"
	tokenName            = "token"
	serverTokenName      = "server-token"
	adminKubeconfigName  = "admin.kubeconfig"
	superAdminName       = "super-admin.kubeconfig"
	kubeconfigsName      = "kubeconfig"
	schedulerConfigName  = "kube-scheduler.yaml"
	auditPolicyName      = "audit-policy.yaml"
	multiServerName      = "multi-server"
	incarnationName      = "incarnation.json"
	clusterResetName     = "cluster-reset.json"
	nodeNameName         = "node-name"
	snapshotsName        = "snapshots"
	agentName            = "agent"
	secretsKeySetName    = "secrets-encryption-keys.json"
	encryptionConfigName = "encryption-config.yaml"
)

// Etcd is the durable etcd's data.
func (d Server) Etcd() string { return d.join(etcdName) }

// NoFsyncEtcd is the no-fsync etcd's data unless --no-fsync-data-dir.
func (d Server) NoFsyncEtcd() string { return d.join(noFsyncName) }

// EtcdPartition is the data of the server's member of a store partition
// (--etcd-partitions), by its name.
func (d Server) EtcdPartition(name string) string { return d.join(partitionsName, name) }

// LegacyNoFsyncEtcd is the no-fsync etcd's default directory in releases
// before it was named etcd-nofsync: removed at start.
func (d Server) LegacyNoFsyncEtcd() string { return d.join(legacyNoFsyncName) }

// EtcdSockets holds the unix sockets the server's own kube-apiserver
// reaches its etcds by (root only).
func (d Server) EtcdSockets() string { return d.join(etcdSocketsName) }

// EtcdMembers records the cluster's etcd members, for a server that runs
// none (--disable-etcd).
func (d Server) EtcdMembers() string { return d.join(etcdMembersName) }

// Datastore records the external etcd a store was put in.
func (d Server) Datastore() string { return d.join(datastoreName) }

// TLS holds the CAs, certificates and keys, and the Secrets keys.
func (d Server) TLS() string { return d.join(tlsName) }

// SecretsKeySet is the Secrets encryption key set the server runs with.
func (d Server) SecretsKeySet() string { return d.join(tlsName, secretsKeySetName) }

// EncryptionConfig is kube-apiserver's encryption configuration, written
// from the key set at every start.
func (d Server) EncryptionConfig() string { return d.join(tlsName, encryptionConfigName) }

// Token is the join token agents join with.
func (d Server) Token() string { return d.join(tokenName) }

// ServerToken is the server token servers join with (a server of
// several).
func (d Server) ServerToken() string { return d.join(serverTokenName) }

// AdminKubeconfig is the administrator's kubeconfig.
func (d Server) AdminKubeconfig() string { return d.join(adminKubeconfigName) }

// SuperAdminKubeconfig is the break-glass kubeconfig.
func (d Server) SuperAdminKubeconfig() string { return d.join(superAdminName) }

// Kubeconfig is the server's own kubeconfig for name (controller-manager,
// scheduler, super-admin-local; admin-local in earlier releases).
func (d Server) Kubeconfig(name string) string {
	return d.join(kubeconfigsName, name+".kubeconfig")
}

// SchedulerConfig is kube-scheduler's configuration file.
func (d Server) SchedulerConfig() string { return d.join(schedulerConfigName) }

// AuditPolicy is kube-apiserver's audit policy.
func (d Server) AuditPolicy() string { return d.join(auditPolicyName) }

// MultiServer marks the server as one of several.
func (d Server) MultiServer() string { return d.join(multiServerName) }

// Incarnation records the durable store's incarnation the server last
// ran with.
func (d Server) Incarnation() string { return d.join(incarnationName) }

// ClusterReset records a --cluster-reset until the next start.
func (d Server) ClusterReset() string { return d.join(clusterResetName) }

// NodeName is the node name the data directory was made for.
func (d Server) NodeName() string { return d.join(nodeNameName) }

// Snapshots holds the durable etcd's snapshots unless
// --etcd-snapshot-dir.
func (d Server) Snapshots() string { return d.join(snapshotsName) }

// Agent is the data directory of the server's own node.
func (d Server) Agent() string { return d.join(agentName) }

// Entry is one entry of the data directory.
type Entry struct {
	Name string // relative to the data directory; a directory ends in /
	What string
}

// Layout is every entry of a server's data directory, in docs/server.md's
// order.
var Layout = []Entry{
	{etcdName + "/", "the durable etcd"},
	{noFsyncName + "/", "the no-fsync etcd, emptied at every start (unless --no-fsync-data-dir)"},
	{partitionsName + "/", "the store partitions' etcds, one directory each (--etcd-partitions)"},
	{legacyNoFsyncName + "/", "an earlier release's no-fsync etcd, removed at start"},
	{etcdSocketsName + "/", "the etcds' unix sockets for the server's own kube-apiserver (root only)"},
	{etcdMembersName, "the cluster's etcd members, on a server that runs none (--disable-etcd)"},
	{datastoreName, "the external etcd the stores are in (--datastore-endpoint), for the commands that do not see the server's flags"},
	{tlsName + "/", "the four CAs, every certificate and key, the Secrets encryption keys and kube-apiserver's encryption configuration"},
	{tokenName, "the join token agents join with"},
	{serverTokenName, "the server token servers join with (a server of several)"},
	{adminKubeconfigName, "the administrator's kubeconfig"},
	{superAdminName, "the break-glass kubeconfig"},
	{kubeconfigsName + "/", "the controller-manager's, the scheduler's and the server's own kubeconfigs"},
	{schedulerConfigName, "kube-scheduler's configuration, written at every start"},
	{auditPolicyName, "kube-apiserver's audit policy (with --audit-log-path)"},
	{multiServerName, "marks a server of several"},
	{incarnationName, "the durable store's incarnation the server last ran with"},
	{clusterResetName, "the last --cluster-reset, until the next normal start"},
	{nodeNameName, "the node name the directory was made for"},
	{snapshotsName + "/", "the durable etcd's snapshots (unless --etcd-snapshot-dir)"},
	{agentName + "/", "the server's own node, laid out as every node's"},
}
