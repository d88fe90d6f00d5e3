// Package etcd runs the embedded etcd members of a k1m server: a durable
// one (fsync on) for everything, and a no-fsync one (no fsync) that holds
// only Events and Leases, wired into kube-apiserver with
// --etcd-servers-overrides. Both listen on loopback and require client
// certificates; a server's own kube-apiserver may reach them over a unix
// socket instead (Member.LocalSocket).
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/wal"

	"k1m.dev/k1m/pkg/constants"
)

// TLS names the files an etcd member serves and checks clients with.
type TLS struct {
	CertFile, KeyFile, CAFile string
	// ClientCAFile, when set, is what a member checks client certificates
	// against instead of CAFile (peers still need CAFile's): a bundle
	// that also trusts an external etcd's client certificate, which
	// kube-apiserver presents to every store.
	ClientCAFile string `json:",omitempty"`
}

// ClientTLSIn is the etcd client certificate a server keeps in its TLS
// directory (kube-apiserver's, which k1m's own tools use too), checking
// members against the etcd CA there.
func ClientTLSIn(tlsDir string) TLS {
	return TLS{CertFile: filepath.Join(tlsDir, "apiserver-etcd-client.crt"), KeyFile: filepath.Join(tlsDir, "apiserver-etcd-client.key"),
		CAFile: filepath.Join(tlsDir, "etcd-ca.crt")}
}

// Member describes one embedded etcd.
type Member struct {
	Name    string
	DataDir string
	Host    string // listen address, e.g. ::1
	Port    int    // client port; the peer port is Port+1
	NoFsync bool   // etcd's --unsafe-no-fsync: for data that may be lost on a crash
	// Partition names the store partition the member is of
	// (constants.StorePartitions); "": the durable or no-fsync store.
	Partition string
	// Pprof serves Go's profiles under /debug/pprof on the client URLs
	// (etcd's --enable-pprof): for benchmarks; servers leave it off.
	Pprof bool
	TLS   TLS
	// QuotaBytes is the database size at which etcd raises its NOSPACE
	// alarm and refuses writes (0: DefaultQuotaBytes).
	QuotaBytes int64
	// DiskReserveBytes is the free space kept on the data directory's file
	// system: under it the member refuses writes (0: DefaultDiskReserveBytes).
	DiskReserveBytes int64
	// ForceNewCluster makes the member forget every other member: the
	// --cluster-reset of a server whose peers are gone.
	ForceNewCluster bool
	// PeerHost makes the member one of a raft cluster across servers: it
	// serves clients on PeerHost too (besides Host) and talks to its peers
	// there, both with TLS and client certificates; empty: a lone member
	// on Host alone.
	PeerHost string
	// InitialCluster and JoinExisting start a member that Join added to a
	// running cluster (etcd's --initial-cluster and
	// --initial-cluster-state=existing); ignored once the member has data.
	InitialCluster string
	JoinExisting   bool
	// ClusterToken is etcd's --initial-cluster-token for a member that
	// starts a new raft cluster (or is restored into one): the cluster's
	// ID is made from it, and members of another cluster ID are refused.
	// Empty: etcd's default, the same for every cluster. Ignored once the
	// member has data, and by a member that joins.
	ClusterToken string
	// LocalSocket, when set, is a unix socket the member also serves
	// clients on, without TLS or client certificates: for the
	// kube-apiserver of the same server, whose every write would
	// otherwise pay TLS at both ends of a loopback connection. Whoever can
	// open the socket has the whole store, so Start keeps its directory
	// the owner's alone (0700).
	LocalSocket string
}

// MaxSocketPath is the longest unix socket path Linux takes: sun_path
// holds 108 bytes, the terminating NUL included.
const MaxSocketPath = 107

// LocalURL is the client URL of the member's LocalSocket ("" without one).
func (m Member) LocalURL() string {
	if m.LocalSocket == "" {
		return ""
	}
	return (&url.URL{Scheme: "unix", Path: m.LocalSocket}).String()
}

// DefaultQuotaBytes is the durable etcd's default quota
// (constants.EtcdDefaultQuotaBytes).
const DefaultQuotaBytes = constants.EtcdDefaultQuotaBytes

// ClientURL is the URL clients on the member's machine use.
func (m Member) ClientURL() string {
	return (&url.URL{Scheme: "https", Host: hostPort(m.Host, m.Port)}).String()
}

// AdvertisedClientURL is the URL other servers reach the member at: on
// PeerHost when it has one.
func (m Member) AdvertisedClientURL() string {
	if m.PeerHost == "" {
		return m.ClientURL()
	}
	return (&url.URL{Scheme: "https", Host: hostPort(m.PeerHost, m.Port)}).String()
}

// PeerURL is the URL its peers reach it at.
func (m Member) PeerURL() string {
	host := m.Host
	if m.PeerHost != "" {
		host = m.PeerHost
	}
	return (&url.URL{Scheme: "https", Host: hostPort(host, m.Port+1)}).String()
}

// Running is a started member.
type Running struct {
	Member Member
	etcd   *embed.Etcd
	stop   sync.Once
	// noSpace serialises the alarm and disk watches' recoveries;
	// diskArmed says the disk watch raised the NOSPACE alarm.
	noSpace   sync.Mutex
	diskArmed bool // under noSpace
}

// Start starts the member and waits until it serves, or ctx ends.
func Start(ctx context.Context, m Member) (*Running, error) {
	cfg, err := config(m)
	if err != nil {
		return nil, err
	}
	if err := m.checkDisk(); err != nil {
		return nil, err
	}
	if err := m.prepareSocketDir(); err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd %s (data %s, %s): %w", m.Name, m.DataDir, m.ClientURL(), err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return &Running{Member: m, etcd: e}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd %s failed while starting: %w", m.Name, err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("etcd %s did not become ready: %w", m.Name, ctx.Err())
	}
}

// Err reports a fatal error of the running member.
func (r *Running) Err() <-chan error { return r.etcd.Err() }

// Stop stops the member gracefully.
// It may be called more than once.
func (r *Running) Stop() { r.stop.Do(r.etcd.Close) }

// NoFsync tells whether the running server skips fsync.
func (r *Running) NoFsync() bool { return r.etcd.Config().UnsafeNoFsync }

func config(m Member) (*embed.Config, error) {
	client, err := url.Parse(m.ClientURL())
	if err != nil {
		return nil, err
	}
	advertised, err := url.Parse(m.AdvertisedClientURL())
	if err != nil {
		return nil, err
	}
	peer, err := url.Parse(m.PeerURL())
	if err != nil {
		return nil, err
	}
	tls := transport.TLSInfo{CertFile: m.TLS.CertFile, KeyFile: m.TLS.KeyFile, TrustedCAFile: m.TLS.CAFile, ClientCertAuth: true}
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.DataDir
	cfg.ListenClientUrls = []url.URL{*client}
	if *advertised != *client {
		cfg.ListenClientUrls = append(cfg.ListenClientUrls, *advertised)
	}
	if m.LocalSocket != "" {
		if n := len(m.LocalSocket); n > MaxSocketPath {
			return nil, fmt.Errorf("etcd %s: its local socket %s is %d bytes long, over the %d a unix socket path takes", m.Name, m.LocalSocket, n, MaxSocketPath)
		}
		// etcd serves a unix:// URL without TLS whatever ClientTLSInfo says.
		cfg.ListenClientUrls = append(cfg.ListenClientUrls, url.URL{Scheme: "unix", Path: m.LocalSocket})
	}
	cfg.AdvertiseClientUrls = []url.URL{*advertised}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(m.Name)
	if m.InitialCluster != "" {
		cfg.InitialCluster = m.InitialCluster
	}
	if m.JoinExisting {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	if m.ClusterToken != "" {
		cfg.InitialClusterToken = m.ClusterToken
	}
	cfg.PeerTLSInfo = tls
	if m.TLS.ClientCAFile != "" {
		tls.TrustedCAFile = m.TLS.ClientCAFile
	}
	cfg.ClientTLSInfo = tls
	cfg.UnsafeNoFsync = m.NoFsync
	cfg.EnablePprof = m.Pprof
	cfg.LogLevel = "warn"
	cfg.QuotaBackendBytes = m.quota()
	cfg.ForceNewCluster = m.ForceNewCluster
	cfg.SnapshotCount = 10000
	cfg.ExperimentalWarningApplyDuration = time.Second
	return cfg, nil
}

// prepareSocketDir makes the LocalSocket's directory, or takes back one
// that exists with wider permissions: the socket itself is made with the
// process's umask, so the directory is what keeps other users out.
func (m Member) prepareSocketDir() error {
	if m.LocalSocket == "" {
		return nil
	}
	dir := filepath.Dir(m.LocalSocket)
	if err := CheckSocketDir(dir); err != nil {
		return fmt.Errorf("etcd %s: its local socket's directory: %w", m.Name, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("etcd %s: its local socket's directory: %w", m.Name, err)
	}
	// Checked again: it may have been made between the check and Mkdir.
	if err := CheckSocketDir(dir); err != nil {
		return fmt.Errorf("etcd %s: its local socket's directory: %w", m.Name, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("etcd %s: its local socket's directory: %w", m.Name, err)
	}
	return nil
}

// CheckSocketDir tells why dir cannot hold a LocalSocket that only this
// process's user can reach, or nil. Clients trust whatever listens at the
// socket's path, so nobody else may be able to put a socket of their own
// there: dir, when it exists, must be a directory (not a link) of this
// user, and each directory above it (links resolved) must belong to root
// or this user and be writable by no one else, unless sticky as /tmp.
func CheckSocketDir(dir string) error {
	if info, err := os.Lstat(dir); err == nil {
		if !info.IsDir() {
			return fmt.Errorf("%s is not a directory (%s)", dir, info.Mode().Type())
		}
		if uid := ownerOf(info); uid != os.Geteuid() {
			return fmt.Errorf("%s belongs to uid %d, not this process's %d", dir, uid, os.Geteuid())
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(dir))
	if err != nil {
		return err
	}
	for p := parent; ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if uid := ownerOf(info); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("%s, above it, belongs to uid %d", p, uid)
		}
		if info.Mode().Perm()&0o022 != 0 && info.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s, above it, is writable by other users (mode %v)", p, info.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

func ownerOf(info os.FileInfo) int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

func (m Member) quota() int64 {
	if m.QuotaBytes > 0 {
		return m.QuotaBytes
	}
	return DefaultQuotaBytes
}

func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// HasData tells whether the member whose data directory is dataDir has
// a write-ahead log: what etcd itself restarts from. A join that failed
// half-way leaves member/snap without one, and must be retried as a join,
// not started as a new cluster.
func HasData(dataDir string) bool { return wal.Exist(filepath.Join(dataDir, "member", "wal")) }

// DiscardData deletes what etcd keeps in dataDir (its member directory),
// leaving the directory itself: the no-fsync member's files are not
// trusted after a stop, since a crash or power loss may have left them
// half-written.
func DiscardData(dataDir string) error {
	return os.RemoveAll(filepath.Join(dataDir, "member"))
}
