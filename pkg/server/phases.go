package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/dnsscale"
	"k1m.dev/k1m/pkg/multicall"
	"k1m.dev/k1m/pkg/netpol"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/podnet"
)

// phase is one named step of Run: docs/server.md's table of the server's
// phases lists them by these names, in this order (TestPhaseTable).
type phase struct {
	name string
	run  func(ctx context.Context) error
}

// errFinished ends Run after a phase with nothing left to do (a
// --cluster-reset), with no error.
var errFinished = errors.New("finished")

// phases are Run's steps, in order. Each leaves what it made on the
// Server for the phases after it.
func (s *Server) phases() []phase {
	return []phase{
		{"resolve", func(context.Context) error { return s.phaseResolve() }},
		{"preflight", func(context.Context) error { return s.phasePreflight() }},
		{"memory", func(context.Context) error { return s.phaseMemory() }},
		{"cluster", s.runCluster},
		{"token", func(context.Context) error { return s.runToken() }},
		{"pki", func(context.Context) error { return s.runPKI() }},
		{"etcd", s.runEtcd},
		{"apiserver", s.runAPIServer},
		{"readiness", func(ctx context.Context) error {
			return s.startReadiness(ctx, s.certs, s.local, s.stores)
		}},
		{"publish", s.runPublish},
		{"controllers", s.runControllers},
		{"token file", func(context.Context) error { return s.runTokenFiles() }},
		{"agent", s.runAgentPhase},
	}
}

// PhaseNames are the names of the server's phases, in order.
func PhaseNames() []string {
	var names []string
	for _, p := range (&Server{}).phases() {
		names = append(names, p.name)
	}
	return names
}

// onStop has f run when Run returns, before what was started earlier.
func (s *Server) onStop(f func()) { s.stops = append(s.stops, f) }

func (s *Server) stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
}

func (s *Server) runCluster(ctx context.Context) error {
	var err error
	s.member, err = s.phaseCluster(ctx)
	return err
}

func (s *Server) runToken() error {
	var err error
	s.token, err = s.phaseToken()
	return err
}

// runPKI makes or loads the certificates; the token names the CA, so
// only now is it complete.
func (s *Server) runPKI() error {
	var err error
	if s.certs, err = s.phasePKI(); err != nil {
		return err
	}
	s.token.CAHash, err = pki.CAHash(s.certs.cluster.CertPEM)
	return err
}

// runEtcd starts the stores, or with --cluster-reset resets the durable
// one and finishes.
func (s *Server) runEtcd(ctx context.Context) error {
	if s.cfg.ClusterReset.Enabled {
		if err := s.phaseClusterReset(ctx, s.certs); err != nil {
			return err
		}
		return errFinished
	}
	var err error
	if s.local, s.stores, err = s.phaseStores(ctx, s.certs, s.token.CAHash); err != nil {
		return err
	}
	s.onStop(s.local.stop)
	return s.forgetReset()
}

// runAPIServer starts kube-apiserver with the Secrets keys and its files,
// and connects as the administrator once it is up.
func (s *Server) runAPIServer(ctx context.Context) error {
	var err error
	if s.secrets, err = s.phaseSecretsKeys(ctx, s.certs, s.local, s.stores); err != nil {
		return err
	}
	opts, err := s.phaseAPIServerFiles(s.certs, s.secrets)
	if err != nil {
		return err
	}
	opts.extra = s.cfg.PassThrough[componentargs.APIServer.Name]
	s.step("starting kube-apiserver on %s (Events and Leases in the no-fsync etcd)", apiURL(s.advertise, s.cfg.HTTPSPort))
	s.apiserver = multicall.Start(ctx, "kube-apiserver", apiserverArgs(s.cfg.Server, s.advertise, s.certs, s.stores, opts))
	s.client, err = s.phaseAdmin(ctx, s.certs, s.apiserver)
	return err
}

// runPublish publishes what nodes and servers read; on a server of
// several also this server, the Secrets keys, and the token rotations it
// follows from now on.
func (s *Server) runPublish(ctx context.Context) error {
	report := func(msg string) { s.step("%s", msg) }
	retry := func(what string, f func() error) error { return retryTransient(ctx, what, transientTimeout, report, f) }
	if err := retry("publishing", func() error { return s.phasePublish(ctx, s.client, s.certs, s.token) }); err != nil {
		return err
	}
	if !s.member.clustered {
		return nil
	}
	if err := retry("checking the kubelet serving CA", func() error { return s.checkKubeletServingCA(ctx, s.client, s.certs) }); err != nil {
		return err
	}
	if err := retry("recording this server", func() error { return s.publishServer(ctx, s.client, &s.token, s.local.durable) }); err != nil {
		return err
	}
	if err := retry("recording the Secrets encryption keys", func() error { return s.publishSecretsKeys(ctx, s.client, s.secrets) }); err != nil {
		return err
	}
	// A rotation on another server while this one was down: follow it
	// before the token files are written.
	if next, err := s.followTokensOnce(ctx, s.client, s.token); err == nil {
		s.token = next
	}
	go s.followTokens(ctx, s.client, s.token)
	return nil
}

// runControllers starts kube-controller-manager and kube-scheduler, then
// k1m's own controllers: the approver, the route publisher and CoreDNS's
// scaler, and the certificates' watch.
func (s *Server) runControllers(ctx context.Context) error {
	var err error
	if s.controllers, err = s.phaseControllers(ctx, s.certs); err != nil {
		return err
	}
	// Join requests and kubelet serving certificates (pkg/approver).
	if err := s.startApprover(ctx, s.client); err != nil {
		return err
	}
	// The pod routes every node follows (pkg/podnet); none when the
	// provider's network routes the pod ranges.
	if s.cfg.Routes == constants.PodRoutesProvider {
		s.step("pod ranges routed by the provider's network (--pod-routes=%s): no route publisher", s.cfg.Routes)
	} else {
		// A client of its own at podnet.RoutesWriteRate, the rate joins
		// reach at approverQPS: the publisher's pacing by the node count
		// is then what limits it, not the controllers that share the
		// server's client (client-go's default, 5 a second).
		client, err := s.clientAt(podnet.RoutesWriteRate)
		if err != nil {
			return err
		}
		rules := s.routeRules(s.client)
		s.runElected(ctx, client, RoutesElection, func(ctx context.Context) { podnet.PublishRoutes(ctx, client, rules, s.cfg.PodRouteEventsPerSecond) })
	}
	// NetworkPolicies compiled into each node's rules (pkg/netpol).
	if slices.Contains(s.cfg.Disable, constants.ComponentNetworkPolicy) {
		s.step("NetworkPolicies not enforced (--disable=%s)", constants.ComponentNetworkPolicy)
	} else {
		s.runElected(ctx, s.client, netpol.Election, (&netpol.Publisher{Client: s.client}).Run)
	}
	// CoreDNS's replicas follow the node count (pkg/dnsscale).
	if per := s.cfg.DNSNodesPerReplica; per > 0 {
		s.runElected(ctx, s.client, dnsscale.Election, (&dnsscale.Scaler{Client: s.client, PerReplica: per}).Run)
	} else {
		s.step("CoreDNS's replicas left as they are set (--dns-nodes-per-replica=0)")
	}
	go s.watchCertificates(ctx)
	return nil
}

// runTokenFiles writes the token files last: their presence tells
// scripts that agents can join.
func (s *Server) runTokenFiles() error {
	if err := s.writeTokenFiles(s.token); err != nil {
		return err
	}
	url := apiURL(s.advertise, s.cfg.HTTPSPort)
	s.step("ready: export KUBECONFIG=%s (or use k1m kubectl)", AdminKubeconfig(s.cfg.DataDir))
	s.step("join nodes with: k1m agent --server %s --token $(cat %s)", url, TokenFile(s.cfg.DataDir))
	if s.token.seal != "" {
		s.step("join servers with: k1m server --server %s --token $(cat %s)%s (it opens the cluster's CA keys: keep it to servers)", url, ServerTokenFile(s.cfg.DataDir), partitionsFlag(s.wantLayout()))
	}
	return nil
}

// runAgentPhase starts the server's own node agent, unless
// --disable-agent, and labels its node a control-plane node once it has
// registered.
func (s *Server) runAgentPhase(ctx context.Context) error {
	if s.cfg.DisableAgent {
		return nil
	}
	s.agentDone = make(chan error, 1)
	go func() { s.agentDone <- s.runAgent(ctx, s.certs, s.client) }()
	go s.labelControlPlane(ctx, s.client)
	return nil
}

// supervise waits for ctx's end or the first component to fail. A
// failure returns its error at once; on ctx's end (SIGTERM or SIGINT,
// which every component got through ctx) kube-apiserver drains its
// requests and the controller-manager, scheduler and agent stop before
// the etcds under them do, and a clean stop returns nil.
func (s *Server) supervise(ctx context.Context) error {
	var failed error
	select {
	case err := <-s.apiserver:
		failed = err
	case err := <-s.agentDone:
		failed = fmt.Errorf("node agent: %w", err)
	case err := <-s.local.durableErr():
		failed = fmt.Errorf("durable etcd: %w", err)
	case err := <-s.local.noFsyncErr():
		failed = fmt.Errorf("no-fsync etcd: %w", err)
	case err := <-s.local.partitionErrs:
		failed = err
	case <-ctx.Done():
	}
	if ctx.Err() == nil {
		return failed // a component failed: exit non-zero
	}
	s.step("stopping: waiting for kube-apiserver to drain and the controller-manager and scheduler to stop, then the etcds stop")
	waitStopped(s.apiserver, stopTimeout)
	waitClosed(s.controllers, stopTimeout)
	if s.agentDone != nil {
		waitStopped(s.agentDone, stopTimeout)
	}
	s.local.stop()
	s.step("stopped cleanly")
	return nil
}
