package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/proxymode"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/pkg/constants"
)

// proxyProcess is kube-proxy among the stock build's processes: the stock
// build runs it as a process of its own (the k1m build inside `k1m
// server`), so its CPU is read apart. Its code is upstream's in both.
const proxyProcess = "k1m kube-proxy"

// runProxy measures kube-proxy in each mode on one fresh stock server per
// mode and round.
func runProxy(ctx context.Context, o Options, rep *Report) error {
	rep.Proxy = &proxymode.Result{Config: o.Proxy}
	var variants []serverVariant
	for _, mode := range proxymode.Modes {
		variants = append(variants, serverVariant{Name: mode, K1M: o.Deployed.Binary(deployed.Stock), Args: []string{"--proxy-mode=" + mode}})
	}
	return eachFresh(ctx, o, "proxy", variants, func(c *scaleout.Cluster, mode string, round int) error {
		pid, err := findProcess(ctx, c.ServerPID(1), proxyProcess)
		if err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(c.Config(1))
		if err != nil {
			return err
		}
		env := proxymode.Env{Client: client, ProxyPID: pid, HTTPClient: &http.Client{Timeout: 10 * time.Second},
			// The one server runs in the host's network namespace.
			ProxyURL: "http://" + net.JoinHostPort("::1", strconv.Itoa(constants.KubeProxyMetricsPort)) + "/metrics",
			Progress: func(line string) { fmt.Fprintf(o.Progress, "  %s, round %d: %s\n", mode, round, line) }}
		steps, err := proxymode.Run(ctx, o.Proxy, env)
		for _, s := range steps {
			s.Mode, s.Round = mode, round
			rep.Proxy.Steps = append(rep.Proxy.Steps, s)
		}
		return errors.Join(err, rep.writeData())
	})
}
