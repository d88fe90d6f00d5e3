package agent

import (
	"context"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/agent/loadbalancer"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/kubeconfig"
)

// startBalancer starts the node's client-side load balancer
// (pkg/agent/loadbalancer) and returns it with the URL the node's
// kubeconfigs name: the balancer's on an agent, --server itself (no
// balancer) on the server's own node, which talks to its local
// kube-apiserver over [::1].
func startBalancer(ctx context.Context, cfg config.Agent, p paths, nodeName string, out io.Writer) (*loadbalancer.LoadBalancer, string, error) {
	if cfg.Embedded {
		return nil, cfg.Server, nil
	}
	lb, err := loadbalancer.Start(ctx, loadbalancer.Config{
		Server:    cfg.Server,
		NodeName:  nodeName,
		StateFile: p.loadBalancerState(),
		Report:    func(msg string) { fmt.Fprintf(out, "k1m agent: %s\n", msg) },
	})
	if err != nil {
		return nil, "", err
	}
	return lb, lb.URL(), nil
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
