// Package agent runs a k1m node: it joins the cluster with a token, starts
// and configures containerd, imports the air-gap images, and runs the
// kubelet and kube-proxy in this process, plus the small controller that
// writes the node's CNI config and routes pod ranges between nodes.
//
// Run takes the completed settings (config.Agent.Complete resolves
// every path, address and name once) and runs these phases in order,
// each logged as it starts ("k1m agent: phase NAME"):
//
//	phase        file          what it does
//	preflight    preflight.go  checks --images-dir, that --data-dir and --run-dir are writable,
//	                           the node name --data-dir was made for (DATA-DIR/node-name), the kernel
//	balancer     balancer.go   starts the client-side load balancer (agents only: the server's own
//	                           node talks to its local kube-apiserver directly)
//	join         join.go       resumes on the node's own client certificate, or joins with the token (then records the node name, preflight.go)
//	                           (keeps the cluster CA, writes the bootstrap kubeconfig); drops a
//	                           kubelet serving certificate the cluster CA signed
//	forwarding   network.go    enables IPv6 forwarding
//	containerd   runtime.go    starts containerd under the node's directories
//	images       runtime.go    imports the air-gap images, then keeps checking that containerd has them
//	kubelet      kubelet.go    makes the node's cgroup, writes the KubeletConfiguration, starts the kubelet
//	bootstrap    join.go       on a join, waits for the kubelet's client certificate and deletes the
//	                           bootstrap kubeconfig; deletes --token-file either way
//	client       follow.go     the node's API client (its own certificate); the balancer follows the
//	                           cluster's API servers through it
//	pod-network  network.go    the node's CNI config and the routes to other nodes' pods (pkg/podnet),
//	                           none when k1m-cluster says the provider routes the pod ranges; its
//	                           pods' NetworkPolicy rules loaded into nftables (pkg/netpol)
//	kube-proxy   kubelet.go    starts kube-proxy
//	watch        follow.go     annotates the Node with its renew interval; on agents, watches
//	                           k1m-cluster for a new lease profile
//	supervise    agent.go      runs until ctx ends or a part fails; stops for a new lease profile
//	                           (ErrRestart) at a random point of the published restart spread
//
// What a phase starts is stopped when Run returns, in the reverse order.
package agent

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/agent/loadbalancer"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/containerd"
	"k1m.dev/k1m/pkg/join"
)

// Run joins the node and runs it until ctx ends or a part fails.
func Run(ctx context.Context, cfg *config.CompletedAgent, out io.Writer) error {
	n := &node{cfg: cfg, out: out}
	defer n.stop()
	for _, p := range n.phases() {
		n.say("phase %s", p.name)
		if err := p.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// phase is one named step of Run.
type phase struct {
	name string
	run  func(ctx context.Context) error
}

// phases are Run's steps, in order (the table in the package doc).
func (n *node) phases() []phase {
	phases := []phase{{"preflight", n.preflight}}
	if n.cfg.BalancerListen != "" {
		phases = append(phases, phase{"balancer", n.startBalancer})
	}
	return append(phases, []phase{
		{"join", n.joinAndRecord},
		{"forwarding", n.enableForwarding},
		{"containerd", n.startContainerd},
		{"images", n.importImages},
		{"kubelet", n.startKubelet},
		{"bootstrap", n.finishBootstrap},
		{"client", n.connect},
		{"pod-network", n.runPodNetwork},
		{"kube-proxy", n.startKubeProxy},
		{"watch", n.watch},
		{"supervise", n.supervise},
	}...)
}

// node is one run of the node agent: what the phases started, for the
// phases after them.
type node struct {
	cfg *config.CompletedAgent
	out io.Writer
	// stops undo what the phases started; run in the reverse order.
	stops []func()

	balancer    *loadbalancer.LoadBalancer // nil on the server's own node
	balancerCtx context.Context
	// settings are the cluster's (k1m-cluster); bootstrapping tells that
	// the node joins with the token rather than resuming.
	settings      join.Settings
	bootstrapping bool
	ctrd          containerd.Config
	runtime       *containerd.Process
	// The kubelet and kube-proxy run on componentsCtx: they stop on their
	// own when the agent restarts for a new lease profile.
	componentsCtx  context.Context
	stopComponents context.CancelFunc
	kubelet, proxy <-chan error
	client         kubernetes.Interface
	annotated      <-chan error
	changed        <-chan join.Settings // nil on the server's own node
}

func (n *node) say(format string, args ...any) {
	fmt.Fprintf(n.out, "k1m agent: "+format+"\n", args...)
}

// onStop has f run when Run returns, before what was started earlier.
func (n *node) onStop(f func()) { n.stops = append(n.stops, f) }

func (n *node) stop() {
	for i := len(n.stops) - 1; i >= 0; i-- {
		n.stops[i]()
	}
}

// supervise waits for ctx's end (nil) or the first part to fail, and
// stops the kubelet and kube-proxy for a new lease profile (ErrRestart).
func (n *node) supervise(ctx context.Context) error {
	var restart <-chan time.Time // set once a new profile is seen
	var next join.Settings
	for {
		select {
		case err := <-n.kubelet:
			return err
		case err := <-n.proxy:
			return err
		case err := <-n.runtime.Done():
			return fmt.Errorf("containerd exited (%v): see %s", err, n.cfg.Paths.ContainerdLog)
		case err := <-n.annotated:
			if err != nil && ctx.Err() == nil {
				return err
			}
		case s := <-n.changed:
			delay := restartDelay(s.RestartSpread, rand.Float64())
			n.say("k1m-cluster's lease profile changed (%s, was %s): restarting the node agent in %s to apply it (the cluster's agents restart spread over %s); pods keep running",
				describeLease(s), describeLease(n.settings), delay.Round(time.Millisecond), s.RestartSpread)
			restart, next = time.After(delay), s
		case <-restart:
			n.stopComponents()
			waitStopped(n.cfg.Timings.ComponentsStop, n.kubelet, n.proxy)
			return fmt.Errorf("%w (%s)", ErrRestart, describeLease(next))
		case <-ctx.Done():
			return nil
		}
	}
}

// waitStopped waits, at most timeout in all, for each component to return.
func waitStopped(timeout time.Duration, components ...<-chan error) {
	deadline := time.After(timeout)
	for _, c := range components {
		select {
		case <-c:
		case <-deadline:
			return
		}
	}
}
