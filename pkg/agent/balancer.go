package agent

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/agent/loadbalancer"
	"k1m.dev/k1m/pkg/kubeconfig"
)

// startBalancer starts the node's client-side load balancer
// (pkg/agent/loadbalancer) on cfg.BalancerListen, first of all: every
// kubeconfig of the node names it (cfg.APIServerURL), and a resumed node
// reads k1m-cluster through it; only the join itself uses --server. It
// stops when Run returns.
func (n *node) startBalancer(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	n.onStop(stop)
	lb, err := loadbalancer.Start(ctx, loadbalancer.Config{
		Server:    n.cfg.Server,
		NodeName:  n.cfg.NodeName,
		StateFile: n.cfg.Paths.LoadBalancerState,
		Listen:    n.cfg.BalancerListen,
		Report:    func(msg string) { n.say("%s", msg) },
		// The servers' readiness, asked with the kubelet's client
		// certificate once the node has one (its join comes later).
		Ready: &loadbalancer.ReadyCheck{CAFile: n.cfg.Paths.CAFile, CertFile: n.cfg.Paths.KubeletClientCert, KeyFile: n.cfg.Paths.KubeletClientCert},
	})
	if err != nil {
		return err
	}
	n.balancer, n.balancerCtx = lb, ctx
	n.onStop(lb.Close)
	return nil
}

// pointKubeconfigAt makes the kubeconfig at path name server. The
// kubelet writes its kubeconfig once, after its TLS bootstrap, with the
// bootstrap kubeconfig's server, and keeps it for as long as its
// certificate is valid: a node that joined before agents had a load
// balancer names --server there, and would go on depending on that one
// server. It returns the server named before ("" when it named server
// already).
func pointKubeconfigAt(path, server string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	was := ""
	for _, c := range cfg.Clusters {
		if c.Server != server {
			was, c.Server = c.Server, server
		}
	}
	if was == "" {
		return "", nil
	}
	return was, kubeconfig.Write(path, cfg)
}
