// Package server runs `k1m server`: two embedded etcds (durable, and
// no-fsync for Events and Leases) and kube-apiserver in this process,
// kube-controller-manager and kube-scheduler as supervised child
// processes (started again whenever they end), the join and cluster
// manifests, and (unless disabled) the node agent. Run validates nothing
// itself: it gets a completed config (pkg/config) and runs one ordered
// list of named phases (Server.phases in phases.go, the table in
// docs/server.md), each leaving what it made on the Server:
//
//	phase        files                          what it does
//	resolve      server.go                      the node's name and addresses
//	preflight    server.go                      ports free, directories writable
//	memory       memory.go                      the memory limit, GOMEMLIMIT
//	cluster      cluster.go                     alone, first of several, or joining
//	token        server.go                      the join token and the server token
//	pki          pki.go                         the CAs and every certificate
//	etcd         stores.go, etcd.go             the stores (or --cluster-reset, then stop)
//	apiserver    secretskeys.go,                the Secrets keys, kube-apiserver's files,
//	             apiserverfiles.go, server.go   kube-apiserver started, the admin client
//	readiness    readiness.go                   this server's readiness, served from now on
//	publish      server.go, cluster.go,         what agents and servers join with, this
//	             tokens.go                      server recorded, rotations followed
//	controllers  server.go                      controller-manager and scheduler, the
//	                                            approver, route publisher, DNS scaler
//	token file   cluster.go                     the token files, written last
//	agent        server.go                      the node agent (pkg/agent)
//
// Then Server.supervise waits for a failure or the stop signal.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/manifests"
	"k1m.dev/k1m/pkg/agent"
	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/approver"
	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/dnsscale"
	"k1m.dev/k1m/pkg/elect"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/metricsserver"
	"k1m.dev/k1m/pkg/multicall"
	"k1m.dev/k1m/pkg/netutil"
	"k1m.dev/k1m/pkg/nodename"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/preflight"
	"k1m.dev/k1m/pkg/schedulerconfig"
	"k1m.dev/k1m/pkg/secretsenc"
	"k1m.dev/k1m/pkg/version"
)

// Server is one k1m server run.
type Server struct {
	cfg       *config.CompletedServer
	out       io.Writer
	nodeName  string
	nodeIP    string
	advertise string
	hostIPs   []net.IP
	adminREST *rest.Config // admin over [::1], set once kube-apiserver is up
	memory    memoryPlan
	member    membership
	// migration is the partitions' migration under way, as the durable
	// etcd recorded it when the server started (nil: none).
	migration *etcd.Migration
	// layoutSeen: the layout and migration records' revisions when the
	// server checked its --etcd-partitions against them.
	layoutSeen etcd.LayoutRevisions

	// What the phases made, for the phases after them.
	token       serverToken
	certs       *certs
	local       etcds
	stores      etcdStores
	secrets     secretsenc.KeySet
	apiserver   <-chan error
	client      kubernetes.Interface
	controllers <-chan struct{}
	agentDone   chan error // nil with --disable-agent
	// stops undo what the phases started, in the reverse order.
	stops []func()
}

// dir is the server's data directory's layout.
func (s *Server) dir() datadir.Server { return datadir.Server(s.cfg.DataDir) }

// AdminKubeconfig is where the server writes the administrator's kubeconfig.
func AdminKubeconfig(dataDir string) string { return datadir.Server(dataDir).AdminKubeconfig() }

// TokenFile is where the server keeps the join token (agents join with it).
func TokenFile(dataDir string) string { return datadir.Server(dataDir).Token() }

// ServerTokenFile is where a server of several keeps the server token: the
// join token with the seal of the bundle of CA keys (servers join with it).
// The cluster never stores the seal.
func ServerTokenFile(dataDir string) string { return datadir.Server(dataDir).ServerToken() }

// Run runs the server until ctx ends or a component fails: its phases
// in order (Server.phases), then it supervises what they started.
func Run(ctx context.Context, flags config.Server, out io.Writer) error {
	cfg, err := flags.Complete()
	if err != nil {
		return err
	}
	s := &Server{cfg: cfg, out: out}
	defer s.stop()
	for _, p := range s.phases() {
		if err := p.run(ctx); errors.Is(err, errFinished) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return s.supervise(ctx)
}

// stopTimeout bounds how long a stop waits for each component; systemd's
// default TimeoutStopSec (90 s) leaves room for both.
const stopTimeout = 40 * time.Second

func waitStopped(done <-chan error, timeout time.Duration) {
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

func waitClosed(done <-chan struct{}, timeout time.Duration) {
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// approverQPS is the approver's client rate. A join is three of its
// requests (a GET of the CSR, a GET of the Node, the approval): client-go's
// default (5/s) would cap joins near 2 a second, and 200/s capped them at
// 76 a second (bench joins, 1,000 joins in 13.1 s, 2026-11-25); 600/s
// matches the controller-manager's signer (flavor.ControllerManagerQPS:
// one request a certificate) at 200 joins a second.
const approverQPS = 600

// clientAt is an admin client with a rate limit of its own, qps requests
// a second with bursts of twice that, apart from the server's shared one.
func (s *Server) clientAt(qps float32) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(s.adminREST)
	cfg.QPS, cfg.Burst = qps, int(2*qps)
	return kubernetes.NewForConfig(cfg)
}

// startApprover starts k1m's CSR approver: on a server of several only
// while this server holds the approver's Lease, so that one process
// decides each node name.
func (s *Server) startApprover(ctx context.Context, admin kubernetes.Interface) error {
	client, err := s.clientAt(approverQPS)
	if err != nil {
		return err
	}
	a := &approver.Approver{Client: client, BootstrapGroup: join.BootstrapGroup, ControlPlane: s.controlPlane(admin), Self: s.nodeName}
	s.runElected(ctx, client, approver.Election, a.Run)
	return nil
}

// RoutesElection is the Lease of the server that publishes the pod routes.
const RoutesElection = "k1m-pod-routes"

// runElected runs lead in the background: on a server of several only
// while this server holds the Lease kube-system/lease, on a lone server
// at once.
func (s *Server) runElected(ctx context.Context, client kubernetes.Interface, lease string, lead func(context.Context)) {
	if s.member.clustered {
		go elect.Run(ctx, client, lease, s.nodeName, lead)
	} else {
		go lead(ctx)
	}
}

// controlPlane is what the approver refuses in kubelet serving
// certificates; this server's own node may keep this server's addresses.
func (s *Server) controlPlane(client kubernetes.Interface) approver.ControlPlane {
	return approver.ControlPlane{ServiceCIDR: s.cfg.ServicePrefix, ClusterCIDR: s.cfg.ClusterPrefix, ClusterDomain: s.cfg.ClusterDomain, Gateways: nodeGateways(s.warn),
		Servers: s.servers(client)}
}

// servers looks up the servers' addresses by node name, this server's own
// among them: what the approver and the route publisher keep for each
// server's own node.
func (s *Server) servers(client kubernetes.Interface) func(context.Context) (map[string][]netip.Addr, error) {
	var own []netip.Addr
	for _, ip := range append(slices.Clone(s.hostIPs), net.ParseIP(s.advertise)) {
		if addr, ok := netip.AddrFromSlice(ip); ok {
			own = append(own, addr.Unmap())
		}
	}
	return approver.ServersOf(client, s.nodeName, own)
}

func (s *Server) step(format string, args ...any) {
	fmt.Fprintf(s.out, stepPrefix+format+"\n", args...)
}

// warn says that something the server does in the background failed and
// what follows (tried again, left out); it goes where the steps go, with
// the time, since it comes long after the start's lines.
func (s *Server) warn(format string, args ...any) {
	fmt.Fprintf(s.out, stepPrefix+"%s: warning: "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339)}, args...)...)
}

// stepPrefix starts every line of the server's own: step and warn are the
// one way they are written (TestOneLoggingPath).
const stepPrefix = "k1m server: "

// phaseResolve settles the node's name and addresses.
func (s *Server) phaseResolve() error {
	var err error
	s.nodeName, s.nodeIP, err = netutil.NodeIdentity(s.cfg.NodeName, s.cfg.NodeIP)
	if err != nil {
		return err
	}
	s.advertise = s.cfg.AdvertiseAddress
	if s.advertise == "" {
		s.advertise = s.nodeIP
	}
	global, err := netutil.GlobalIPv6()
	if err != nil {
		return err
	}
	s.hostIPs = hostAddresses(global, netip.MustParseAddr(s.nodeIP), netip.MustParseAddr(s.advertise), s.cfg.ClusterPrefix, s.cfg.ServicePrefix)
	return nil
}

// hostAddresses are the server's own addresses: the host's global IPv6
// addresses, its node address and its advertised address, each once. An
// address inside the pod or service range is not the host's but the pod
// network's: the gateway of the node's own pod range on its bridge, there
// from the first pod until k1m cleanup, so present when a server
// restarts. Counted as the server's, it would make the route publisher
// refuse the server's own pod range (a range that holds a server's
// address), and its pods unreachable from every other node.
func hostAddresses(global []netip.Addr, nodeIP, advertise netip.Addr, podNetwork ...netip.Prefix) []net.IP {
	var out []net.IP
	seen := map[netip.Addr]bool{}
	for _, a := range global {
		if !slices.ContainsFunc(podNetwork, func(p netip.Prefix) bool { return p.Contains(a) }) && !seen[a] {
			seen[a] = true
			out = append(out, net.IP(a.AsSlice()))
		}
	}
	for _, a := range []netip.Addr{nodeIP, advertise} {
		if !seen[a] {
			seen[a] = true
			out = append(out, net.IP(a.AsSlice()))
		}
	}
	return out
}

// phasePreflight checks directories and ports before anything is written.
func (s *Server) phasePreflight() error {
	var errs []error
	errs = append(errs, preflight.Writable("--data-dir", s.cfg.DataDir), preflight.Writable("--no-fsync-data-dir", s.cfg.NoFsyncDataDir))
	if errs[0] == nil {
		errs = append(errs, checkNodeName(s.cfg.DataDir, s.cfg.NodeName, s.nodeName))
	}
	errs = append(errs, preflight.PortFree("--https-listen-port", s.cfg.BindAddress, s.cfg.HTTPSPort), s.checkSecretsKey())
	for _, p := range []struct {
		flag string
		port int
	}{{"--etcd-port", s.cfg.EtcdPort}, {"--etcd-port (peer, +1)", s.cfg.EtcdPort + 1}, {"--no-fsync-etcd-port", s.cfg.NoFsyncEtcdPort}, {"--no-fsync-etcd-port (peer, +1)", s.cfg.NoFsyncEtcdPort + 1},
		{"kube-controller-manager's port", constants.ControllerManagerPort}, {"kube-scheduler's port", constants.SchedulerPort}} {
		errs = append(errs, preflight.PortFree(p.flag, "::1", p.port))
	}
	errs = append(errs, preflight.PortFree("the readiness port", s.cfg.BindAddress, constants.ServerReadyPort))
	if !s.cfg.DisableAgent {
		if _, err := airgap.Archives(s.cfg.ImagesDir); err != nil {
			errs = append(errs, fmt.Errorf("--images-dir: %w (or run with --disable-agent)", err))
		}
		errs = append(errs, preflight.PortFree("the kubelet's port (or run with --disable-agent)", "::", constants.KubeletPort))
	}
	if err := errors.Join(errs...); err != nil {
		return err // nothing written
	}
	return nodename.Record(s.cfg.DataDir, s.nodeName)
}

// serverToken is the server's join token and whether its bootstrap-token
// Secret is still to be created (a token the data directory keeps has
// one already: creating it again at every start would bring back a
// token an operator deleted), and the seal of the server token when this
// server holds it.
type serverToken struct {
	pki.Token // the join token, never with the seal
	create    bool
	replace   string // ID of the token --token replaces, deleted once it exists
	seal      string
}

// phaseToken settles the join token (joinToken) and the seal this server
// holds: from DATA-DIR/server-token, or from a joining server's --token;
// none yet on a lone server, or on a server that joined before servers
// had a seal (publishServer makes one when the cluster has none).
func (s *Server) phaseToken() (serverToken, error) {
	t, err := s.joinToken()
	if err != nil {
		return serverToken{}, err
	}
	t.seal = s.cfg.JoinToken.Seal
	if data, err := os.ReadFile(ServerTokenFile(s.cfg.DataDir)); err == nil {
		kept, err := pki.ParseToken(string(data))
		if err != nil || !kept.IsServerToken() {
			return serverToken{}, fmt.Errorf("%s: not a server token (%v): restore it from another server's copy, or run k1m token rotate there", ServerTokenFile(s.cfg.DataDir), err)
		}
		t.seal = kept.Seal
	}
	return t, nil
}

// joinToken loads the join token from DATA-DIR/token, or takes --token,
// or makes one.
func (s *Server) joinToken() (serverToken, error) {
	var kept *pki.Token
	if data, err := os.ReadFile(TokenFile(s.cfg.DataDir)); err == nil {
		t, err := pki.ParseToken(string(data))
		if err != nil {
			return serverToken{}, fmt.Errorf("%s: %w (delete it to have a new token made)", TokenFile(s.cfg.DataDir), err)
		}
		kept = &t
	}
	switch {
	case s.cfg.JoinServer != "" && kept != nil:
		return serverToken{Token: *kept}, nil
	case s.cfg.JoinServer != "":
		// The cluster's token: its bootstrap-token Secret exists.
		return serverToken{Token: s.cfg.JoinToken.JoinToken()}, nil
	case s.cfg.Token != "" && kept != nil && kept.Secret != s.cfg.Token:
		return serverToken{Token: pki.Token{Secret: s.cfg.Token}, create: true, replace: kept.TokenID()}, nil
	case s.cfg.Token != "":
		return serverToken{Token: pki.Token{Secret: s.cfg.Token}, create: kept == nil}, nil
	case kept != nil:
		return serverToken{Token: *kept}, nil
	}
	secret, err := pki.NewSecret()
	return serverToken{Token: pki.Token{Secret: secret}, create: true}, err
}

// phaseAdmin writes the admin kubeconfig (cluster-admin through RBAC), the
// break-glass super-admin kubeconfig, and waits for kube-apiserver. The
// server itself talks to kube-apiserver as the super-admin: it applies
// the binding the admin's rights come from.
func (s *Server) phaseAdmin(ctx context.Context, c *certs, apiserver <-chan error) (kubernetes.Interface, error) {
	server := apiURL(s.advertise, s.cfg.HTTPSPort)
	for _, k := range []struct {
		path, user string
		creds      pair
	}{
		{AdminKubeconfig(s.cfg.DataDir), "k1m-admin", c.admin},
		{s.dir().SuperAdminKubeconfig(), "k1m-super-admin", c.superAdmin},
	} {
		cfg := kubeconfig.Build(server, c.cluster.CertPEM, k.user, kubeconfig.Credentials{CertFile: k.creds.cert, KeyFile: k.creds.key})
		if err := kubeconfig.Write(k.path, cfg); err != nil {
			return nil, err
		}
	}
	local := kubeconfig.Build(apiURL("::1", s.cfg.HTTPSPort), c.cluster.CertPEM, "k1m-super-admin", kubeconfig.Credentials{CertFile: c.superAdmin.cert, KeyFile: c.superAdmin.key})
	localPath := s.dir().Kubeconfig("super-admin-local")
	if err := kubeconfig.Write(localPath, local); err != nil {
		return nil, err
	}
	// Written by builds before the admin was bound through RBAC.
	if err := fsutil.RemoveIfExists(s.dir().Kubeconfig("admin-local")); err != nil {
		return nil, err
	}
	restCfg, err := kubeconfig.RESTConfig(localPath)
	if err != nil {
		return nil, err
	}
	s.adminREST = restCfg
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	err = poll.Until(ctx, time.Second, 5*time.Minute, "kube-apiserver ready", func(ctx context.Context) error {
		select {
		case err := <-apiserver:
			return poll.Stop(err)
		default:
		}
		return poll.APIServerReady(ctx, client.Discovery().RESTClient())
	})
	if err != nil {
		return nil, err
	}
	s.step("kube-apiserver ready after %s", time.Since(start).Round(time.Second))
	return client, nil
}

// phasePublish writes what agents need to join, then the manifests.
func (s *Server) phasePublish(ctx context.Context, client kubernetes.Interface, c *certs, token serverToken) error {
	dns := s.cfg.DNSServiceIP
	settings := join.Settings{RenewInterval: s.cfg.Lease.RenewInterval, LeaseDurationSeconds: s.cfg.Lease.LeaseDurationSeconds(),
		ClusterDomain: s.cfg.ClusterDomain, ClusterDNS: dns.String(), ClusterCIDR: s.cfg.ClusterCIDR, ServiceCIDR: s.cfg.ServiceCIDR,
		PodRoutes: s.cfg.Routes}
	published, err := join.ReadPublished(ctx, client)
	if err != nil {
		return err
	}
	if published != nil {
		cluster, err := join.PodRoutesOf(published)
		if err != nil {
			return err
		}
		if err := checkPodRoutes(s.cfg.Routes, cluster); err != nil {
			return err
		}
	}
	change, err := s.phaseLeaseChange(ctx, client, published)
	if err != nil {
		return err
	}
	settings.RestartSpread, settings.SlowestInFlight = change.spread, change.slowestInFlight
	if published != nil {
		nodes, err := dnsscale.CountNodes(ctx, client)
		if err != nil {
			return fmt.Errorf("sizing the agents' rebalance spread: %w", err)
		}
		settings.RebalanceSpread = rebalanceSpread(nodes)
	}
	if err := s.checkRelease(join.ServerVersions(published)); err != nil {
		return err
	}
	if err := join.Publish(ctx, client, c.cluster.CertPEM, apiURL(s.advertise, s.cfg.HTTPSPort), version.Mine(), settings); err != nil {
		return err
	}
	if token.create {
		if err := join.EnsureToken(ctx, client, token.Token, join.ServerTokenDescription); err != nil {
			return err
		}
	}
	if token.replace != "" {
		if err := join.DeleteToken(ctx, client, token.replace); err != nil && !errors.Is(err, join.ErrTokenNotFound) {
			return err
		}
		s.step("--token replaced the join token %s, which is deleted", token.replace)
	}
	return s.applyManifests(ctx, client, c, dns)
}

// applyManifests applies manifests/ with the values this cluster's size
// and settings give: CoreDNS's replicas and metrics-server's requests for
// the present node count, the packaged components less --disable's.
func (s *Server) applyManifests(ctx context.Context, client kubernetes.Interface, c *certs, dns net.IP) error {
	replicas, err := dnsscale.Initial(ctx, client, s.cfg.DNSNodesPerReplica)
	if err != nil {
		return err
	}
	nodes, err := dnsscale.CountNodes(ctx, client)
	if err != nil {
		return err
	}
	metricsCPU, metricsMemory := metricsserver.Requests(nodes)
	kubeletServingCA, err := os.ReadFile(c.kubeletServing.cert)
	if err != nil {
		return err
	}
	s.step("applying manifests (node RBAC, CoreDNS at %s, %d replicas; %s)", dns, replicas, packagedList(s.cfg.Disable))
	return manifests.Apply(ctx, s.adminREST, manifests.Values{ClusterDomain: s.cfg.ClusterDomain, ClusterDNS: dns.String(), CoreDNSImage: airgap.CoreDNSImage,
		BootstrapGroup: join.BootstrapGroup, AdminGroup: constants.AdminGroup, CoreDNSReplicas: replicas,
		LocalStoragePath: s.cfg.DefaultLocalStoragePath, LocalPathProvisionerImage: airgap.LocalPathProvisionerImage, HelperImage: airgap.BusyboxImage,
		MetricsServerImage: airgap.MetricsServerImage, MetricsServerCPU: metricsCPU, MetricsServerMemory: metricsMemory, KubeletServingCA: string(kubeletServingCA),
		Disabled: s.cfg.Disable})
}

// packagedList says which packaged components are deployed, for a
// progress line.
func packagedList(disabled []string) string {
	if len(disabled) == 0 {
		return "every packaged component"
	}
	return "packaged components but --disable " + strings.Join(disabled, ",")
}

// phaseControllers starts kube-controller-manager and kube-scheduler as
// supervised child processes of this binary, each with its share of the
// Go memory limit (goMemoryShares): one that ends, as upstream's do when
// they lose their leader election (a store hiccup, a partition), is
// started again and campaigns again, while kube-apiserver, the etcds and
// the node keep running. The returned channel is closed once both have
// stopped after ctx ended.
func (s *Server) phaseControllers(ctx context.Context, c *certs) (<-chan struct{}, error) {
	kcm := kubeconfig.Build(apiURL("::1", s.cfg.HTTPSPort), c.cluster.CertPEM, "system:kube-controller-manager", kubeconfig.Credentials{CertFile: c.controllerManager.cert, KeyFile: c.controllerManager.key})
	kcmPath := s.dir().Kubeconfig("controller-manager")
	sched := kubeconfig.Build(apiURL("::1", s.cfg.HTTPSPort), c.cluster.CertPEM, "system:kube-scheduler", kubeconfig.Credentials{CertFile: c.scheduler.cert, KeyFile: c.scheduler.key})
	schedPath := s.dir().Kubeconfig("scheduler")
	if err := kubeconfig.Write(kcmPath, kcm); err != nil {
		return nil, err
	}
	if err := kubeconfig.Write(schedPath, sched); err != nil {
		return nil, err
	}
	schedConfigPath := s.dir().SchedulerConfig()
	schedFlags, err := s.writeSchedulerConfig(schedConfigPath, schedPath)
	if err != nil {
		return nil, err
	}
	shares := s.shareGoMemory()
	s.step("starting kube-controller-manager (node lease %s, grace period %s) and kube-scheduler, each a child process started again whenever it ends", s.cfg.Lease.LeaseDuration, s.cfg.Lease.GracePeriod)
	// In a fixed order: the controller manager first, then the scheduler.
	var stopped []<-chan struct{}
	for _, component := range []struct {
		name        string
		args        []string
		memoryLimit int64
	}{
		{componentargs.ControllerManager.Name, componentargs.Merge(controllerManagerArgs(s.cfg.Server, s.cfg.Lease, kcmPath, c, s.member.clustered), s.cfg.PassThrough[componentargs.ControllerManager.Name]), shares.ControllerManager},
		{componentargs.Scheduler.Name, componentargs.Merge(schedulerArgs(schedConfigPath, schedPath, s.member.clustered), schedFlags), shares.Scheduler},
	} {
		stopped = append(stopped, multicall.Supervise(ctx, multicall.Supervised{
			Name:    component.name,
			Args:    component.args,
			Env:     goMemoryLimitEnv(component.memoryLimit),
			Backoff: multicall.DefaultBackoff,
			OnExit:  func(e multicall.Exit) { s.step("%s", e) },
		}))
	}
	all := make(chan struct{})
	go func() {
		for _, ch := range stopped {
			<-ch
		}
		close(all)
	}()
	return all, nil
}

// writeSchedulerConfig writes kube-scheduler's configuration file at path,
// with the --kube-scheduler-arg flags it would ignore beside a file put
// into it, and returns the other pass-through flags.
func (s *Server) writeSchedulerConfig(path, kubeconfigPath string) ([]componentargs.Arg, error) {
	c := schedulerconfig.Build(schedulerSettings(s.cfg.Server, kubeconfigPath))
	// Validate checked these values.
	flags, err := schedulerconfig.Apply(c, s.cfg.PassThrough[componentargs.Scheduler.Name])
	if err != nil {
		return nil, err
	}
	return flags, schedulerconfig.Write(path, c)
}

// runAgent runs this machine's node agent over loopback, on the client
// certificate the server gives it (ownNodeCredentials), never a join token.
func (s *Server) runAgent(ctx context.Context, c *certs, client kubernetes.Interface) error {
	a := config.DefaultAgent()
	a.DataDir = s.dir().Agent()
	a.RunDir = filepath.Join("/run/k1m", s.nodeName)
	a.Server = apiURL("::1", s.cfg.HTTPSPort)
	a.Token = "" // the node starts on the credentials ownNodeCredentials writes
	a.NodeName = s.nodeName
	a.NodeIP = s.nodeIP
	a.ImagesDir = s.cfg.ImagesDir
	a.ProxyMode = s.cfg.ProxyMode
	a.PodLogsDir = s.cfg.PodLogsDir
	a.KubeletArgs, a.KubeProxyArgs = s.cfg.KubeletArgs, s.cfg.KubeProxyArgs
	a.NodeLabels, a.NodeTaints = s.cfg.NodeLabels, s.cfg.NodeTaints
	a.Embedded = true
	a.KubeReservedMemory = s.memory.Limit
	completed, err := a.Complete()
	if err != nil {
		return err
	}
	if err := s.ownNodeCredentials(ctx, client, c, completed); err != nil {
		return err
	}
	return agent.Run(ctx, completed, s.out)
}
