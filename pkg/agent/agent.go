// Package agent runs a k1m node: it joins the cluster with a token, starts
// and configures containerd, imports the air-gap images, and runs the
// kubelet and kube-proxy in this process, plus the small controller that
// writes the node's CNI config and routes pod ranges between nodes.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/cgroups"
	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/containerd"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/multicall"
	"k1m.dev/k1m/pkg/netutil"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/podnet"
	"k1m.dev/k1m/pkg/preflight"
)

// imageGuardInterval is how often the agent checks that containerd still
// has every air-gap image.
const imageGuardInterval = 30 * time.Second

// Run joins the node and runs it until ctx ends or a part fails.
func Run(ctx context.Context, cfg config.Agent, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.ReadTokenFile(); err != nil {
		return err
	}
	passThrough, _ := cfg.PassThrough() // checked by Validate
	nodeName, nodeIP, err := netutil.NodeIdentity(cfg.NodeName, cfg.NodeIP)
	if err != nil {
		return err
	}
	if _, err := airgap.Archives(cfg.ImagesDir); err != nil {
		return fmt.Errorf("--images-dir: %w", err)
	}
	p := paths{data: cfg.DataDir, run: cfg.RunDir}
	if err := preflight.Writable("--data-dir", p.data); err != nil {
		return err
	}
	if err := preflight.Writable("--run-dir", p.run); err != nil {
		return err
	}
	if err := preflight.Kernel("/"); err != nil {
		return err
	}
	// The balancer first: a resumed node reads k1m-cluster through it, and
	// every kubeconfig of the node names it (apiURL); only the join itself
	// uses --server. It stops with the node agent.
	balancerCtx, stopBalancer := context.WithCancel(ctx)
	defer stopBalancer()
	lb, apiURL, err := startBalancer(balancerCtx, cfg, p, nodeName, out)
	if err != nil {
		return err
	}
	if lb != nil {
		defer lb.Close()
	}
	settings, bootstrapping, err := joinOrResume(ctx, cfg, p, nodeName, nodeIP, apiURL, out)
	if err != nil {
		return err
	}
	if dropped, err := p.dropClusterCAServingCert(); err != nil {
		return err
	} else if dropped {
		fmt.Fprintf(out, "k1m agent: the kubelet's serving certificate was signed by the cluster CA (before kubelet serving certificates had a CA of their own): removed, the kubelet asks for a new one\n")
	}
	if err := podnet.EnableForwarding(); err != nil {
		return err
	}
	restrict, err := containerd.LacksSysResource()
	if err != nil {
		return err
	}
	ctrd := containerd.Config{Root: p.containerdRoot(), State: p.containerdState(), CNIConfDir: p.cniConfDir(), CNIBinDir: "/usr/lib/cni", RestrictOOMScoreAdj: restrict}
	fmt.Fprintf(out, "k1m agent: starting containerd (%s, log %s)\n", ctrd.Address(), p.containerdLog())
	runtime, err := containerd.Start(ctx, ctrd, p.containerdLog())
	if err != nil {
		return err
	}
	defer runtime.Stop()
	fmt.Fprintf(out, "k1m agent: importing images from %s\n", cfg.ImagesDir)
	if err := airgap.Import(ctx, ctrd.Address(), cfg.ImagesDir); err != nil {
		return err
	}
	go airgap.Guard(ctx, ctrd.Address(), cfg.ImagesDir, imageGuardInterval, func(msg string) { fmt.Fprintf(out, "k1m agent: %s\n", msg) })
	cgroupRoot := "/k1m/" + nodeName
	if err := cgroups.Ensure(cgroupRoot); err != nil {
		return err
	}
	if err := writeKubeletConfig(p.kubeletConfig(), kubeletConfig(p, settings, cgroupRoot, ctrd.Endpoint(), cfg.PodLogsDir, cfg.KubeReservedMemory)); err != nil {
		return err
	}
	fmt.Fprintf(out, "k1m agent: starting the kubelet (renews its Lease every %s, lease %ds)\n", settings.RenewInterval, settings.LeaseDurationSeconds)
	// The kubelet and kube-proxy stop on their own context when the agent
	// restarts for a new lease profile.
	componentsCtx, stopComponents := context.WithCancel(ctx)
	defer stopComponents()
	kubelet := multicall.Start(componentsCtx, componentargs.Kubelet.Name, componentargs.Merge(kubeletArgs(p, nodeName, nodeIP, bootstrapping), passThrough[componentargs.Kubelet.Name]))
	if bootstrapping {
		// The kubelet writes its kubeconfig first, then gets the
		// certificate it names once k1m's approver approved its CSR and
		// kube-controller-manager signed it. From then on the node lives
		// on that certificate (the kubelet rotates it): the token is not
		// kept.
		if err := waitForFile(ctx, p.kubeletClientCert(), 3*time.Minute, kubelet); err != nil {
			return fmt.Errorf("the kubelet got no client certificate (TLS bootstrap; k1m kubectl get csr shows whether the server denied it and why): %w", err)
		}
		if err := os.Remove(p.bootstrapKubeconfig()); err != nil {
			return err
		}
		fmt.Fprintf(out, "k1m agent: node %s joined: it runs on its own client certificate now, and the join token is not kept\n", nodeName)
	}
	// Joined or resumed, the node needs no join credential from now on
	// (a reinstall writes the token file again for a node that has its
	// certificate already).
	if err := forgetTokenFile(cfg.TokenFile, out); err != nil {
		return err
	}
	restCfg, err := kubeconfig.RESTConfig(p.kubeletKubeconfig())
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	if lb != nil {
		// Through the balancer itself, with the node's own certificate.
		lb.Follow(balancerCtx, client)
	}
	podnet.Network{Self: nodeName, ConfDir: p.cniConfDir(), IPAMDir: p.cniIPAMDir(), Published: true}.Run(ctx, client)
	fmt.Fprintf(out, "k1m agent: starting kube-proxy (%s mode)\n", cfg.ProxyMode)
	proxy := multicall.Start(componentsCtx, componentargs.KubeProxy.Name, componentargs.Merge(proxyArgs(p, nodeName, cfg.ProxyMode, settings.ClusterCIDR), passThrough[componentargs.KubeProxy.Name]))
	annotated := make(chan error, 1)
	go func() { annotated <- annotateNode(ctx, client, nodeName, settings.RenewInterval) }()
	// The server's own node needs no watch: the server restarts to change
	// the profile, and its node with it.
	var changed <-chan join.Settings
	if !cfg.Embedded {
		changed = watchSettings(ctx, client, settings)
	}
	for {
		select {
		case err := <-kubelet:
			return err
		case err := <-proxy:
			return err
		case err := <-runtime.Done():
			return fmt.Errorf("containerd exited (%v): see %s", err, p.containerdLog())
		case err := <-annotated:
			if err != nil && ctx.Err() == nil {
				return err
			}
		case s := <-changed:
			fmt.Fprintf(out, "k1m agent: k1m-cluster's lease profile changed (%s, was %s): restarting the node agent to apply it; pods keep running\n", describeLease(s), describeLease(settings))
			stopComponents()
			waitStopped(10*time.Second, kubelet, proxy)
			return fmt.Errorf("%w (%s)", ErrRestart, describeLease(s))
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

// joinOrResume gets the cluster's settings: with the node's own
// credentials when it has valid ones, else by joining with the token
// (which then must be given). bootstrapping tells which. The join talks
// to --server; the node's kubeconfigs name apiURL.
func joinOrResume(ctx context.Context, cfg config.Agent, p paths, nodeName, nodeIP, apiURL string, out io.Writer) (join.Settings, bool, error) {
	expires, why := p.ownCredentials(time.Now())
	if why == nil {
		fmt.Fprintf(out, "k1m agent: node %s starts on its own client certificate (valid until %s); no token needed\n", nodeName, expires.UTC().Format(time.RFC3339))
		was, err := pointKubeconfigAt(p.kubeletKubeconfig(), apiURL)
		if err != nil {
			return join.Settings{}, false, err
		}
		if was != "" {
			fmt.Fprintf(out, "k1m agent: %s named %s: it names %s now\n", p.kubeletKubeconfig(), was, apiURL)
		}
		settings, err := join.ReadSettings(ctx, p.kubeletKubeconfig())
		return settings, false, err
	}
	if cfg.Token == "" {
		return join.Settings{}, false, fmt.Errorf("--token is empty, and node %s cannot start without one: %v; give a join token (k1m token create on a server, or the server's DATA-DIR/token)", nodeName, why)
	}
	token, _ := pki.ParseToken(cfg.Token) // checked by Validate
	fmt.Fprintf(out, "k1m agent: joining %s as node %s (%s) with token %s\n", cfg.Server, nodeName, nodeIP, token.TokenID())
	found, err := join.Discover(ctx, cfg.Server, token)
	if err != nil {
		return join.Settings{}, false, joinError(cfg, err)
	}
	if err := p.forgetCredentials(); err != nil {
		return join.Settings{}, false, err
	}
	if err := fsutil.WriteFile(p.caFile(), found.CAPEM, 0o644); err != nil {
		return join.Settings{}, false, err
	}
	// The kubelet copies this server into the kubeconfig it writes.
	boot := kubeconfig.Build(apiURL, found.CAPEM, "kubelet-bootstrap", kubeconfig.Credentials{Token: token.Secret})
	return found.Settings, true, kubeconfig.Write(p.bootstrapKubeconfig(), boot)
}

// joinError says, in the user's words, what a join error is about: the
// agent's --server or --token, or for the server's own node the server.
func joinError(cfg config.Agent, err error) error {
	var je *join.Error
	switch {
	case !errors.As(err, &je):
		return err
	case cfg.Embedded:
		return fmt.Errorf("the server's own node could not join its kube-apiserver at %s: %v", cfg.Server, je.Err)
	case je.Input == join.InputServer:
		return fmt.Errorf("--server %s: %v", cfg.Server, je.Err)
	default:
		return fmt.Errorf("--token: %v", je.Err)
	}
}

// forgetTokenFile deletes --token-file when there is one.
func forgetTokenFile(path string, out io.Writer) error {
	if path == "" {
		return nil
	}
	err := os.Remove(path)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("--token-file: %w", err)
	}
	fmt.Fprintf(out, "k1m agent: deleted --token-file %s\n", path)
	return nil
}

// waitForFile waits for path to appear while the component behind it runs.
func waitForFile(ctx context.Context, path string, timeout time.Duration, component <-chan error) error {
	deadline := time.After(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case err := <-component:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("timed out waiting for " + path)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
