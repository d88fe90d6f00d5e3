package server

import (
	"context"
	"net"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/readiness"
)

// startReadiness runs this server's readiness (pkg/readiness) and serves
// it on constants.ServerReadyPort, on kube-apiserver's bind address with
// kube-apiserver's serving certificate, to clients with a cluster client
// certificate: kube-apiserver's /readyz over loopback as the server's
// components reach it, and a write to each store kube-apiserver uses
// (on an API-server-only server, the cluster's members it uses). Agents
// check it every 5 s (pkg/agent/loadbalancer) and leave a server that is
// not ready.
func (s *Server) startReadiness(ctx context.Context, c *certs, local etcds, stores etcdStores) error {
	probes, err := s.readinessProbes(ctx, local, stores)
	if err != nil {
		return err
	}
	tlsCfg, err := readiness.ServerTLS(readiness.TLSFiles{CertFile: c.apiserver.cert, KeyFile: c.apiserver.key, ClientCAFile: c.cluster.cert})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(s.cfg.BindAddress, strconv.Itoa(constants.ServerReadyPort)))
	if err != nil {
		return err
	}
	checker := readiness.New(readiness.Config{Probes: probes, Report: func(msg string) { s.step("readiness: %s", msg) }})
	go checker.Run(ctx)
	go func() {
		if err := readiness.Serve(ctx, l, tlsCfg, checker.Handler()); err != nil {
			s.warn("readiness on port %d: %v", constants.ServerReadyPort, err)
		}
	}()
	s.step("readiness on https://%s%s (client certificates of the cluster CA)", net.JoinHostPort(s.advertise, strconv.Itoa(constants.ServerReadyPort)), readiness.Path)
	return nil
}

// readinessProbes are kube-apiserver's /readyz and a write probe of each
// store; the etcd clients close when ctx ends.
func (s *Server) readinessProbes(ctx context.Context, local etcds, stores etcdStores) ([]readiness.Probe, error) {
	clientset, err := kubernetes.NewForConfig(rest.CopyConfig(s.adminREST)) // its own rate limit
	if err != nil {
		return nil, err
	}
	probes := []readiness.Probe{readiness.APIServerProbe(clientset.Discovery().RESTClient())}
	for _, store := range []struct {
		name      string
		own       *etcd.Member
		endpoints []string
	}{
		{"durable etcd", memberOf(local.durable), stores.durable},
		{"no-fsync etcd", noFsyncMemberOf(local.noFsync), stores.noFsync}, // none in the stock build: one store
	} {
		cli, err := s.probeClient(store.own, store.endpoints, stores.tls)
		if err != nil {
			return nil, err
		}
		if cli == nil {
			continue
		}
		go func() { <-ctx.Done(); cli.Close() }()
		probes = append(probes, readiness.WriteProbe(store.name, cli, s.nodeName))
	}
	// A partition is checked by a quorum read, not a write: one whose
	// quota is full refuses its resource's writes on every server alike,
	// and agents leaving every server would not help.
	for i, p := range stores.partitions {
		var own *etcd.Member
		if i < len(local.partitions) {
			own = &local.partitions[i].Member
		}
		cli, err := s.probeClient(own, p.urls, stores.tls)
		if err != nil {
			return nil, err
		}
		go func() { <-ctx.Done(); cli.Close() }()
		probes = append(probes, readiness.QuorumProbe(p.partition.Name+" partition etcd", cli))
	}
	if local.noFsync != nil {
		// Its member in the generation the durable etcd records: one
		// linearizable read of each store per round.
		probes = append(probes, readiness.Probe{Name: "no-fsync generation", Check: local.noFsync.Current})
	}
	return probes, nil
}

// probeClient reaches a store: this server's own member over TLS on
// loopback (kube-apiserver's unix socket is kube-apiserver's), else the
// members kube-apiserver uses, with its TLS; nil when there is no store.
func (s *Server) probeClient(own *etcd.Member, endpoints []string, tls etcd.TLS) (*clientv3.Client, error) {
	switch {
	case own != nil:
		return etcd.NewClient([]string{own.ClientURL()}, EtcdClientTLS(s.cfg.DataDir))
	case len(endpoints) > 0:
		return etcd.NewClient(endpoints, tls)
	}
	return nil, nil
}
