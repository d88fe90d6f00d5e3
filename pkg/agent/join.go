package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/poll"
	"k1m.dev/k1m/pkg/version"
)

// joinOrResume gets the cluster's settings: with the node's own
// credentials when it has valid ones, else by joining with the token
// (which then must be given). A kubelet serving certificate the cluster
// CA signed is dropped either way.
func (n *node) joinOrResume(ctx context.Context) error {
	var err error
	if expires, why := ownCredentials(n.cfg.Paths, time.Now()); why == nil {
		n.settings, err = n.resume(ctx, expires)
	} else {
		n.settings, err = n.joinWithToken(ctx, why)
		n.bootstrapping = true
	}
	if err != nil {
		return err
	}
	if dropped, err := dropClusterCAServingCert(n.cfg.Paths); err != nil {
		return err
	} else if dropped {
		n.say("the kubelet's serving certificate was signed by the cluster CA (before kubelet serving certificates had a CA of their own): removed, the kubelet asks for a new one")
	}
	return nil
}

// resume reads the cluster's settings with the node's own certificate,
// through cfg.APIServerURL, which its kubeconfig is made to name.
func (n *node) resume(ctx context.Context, expires time.Time) (join.Settings, error) {
	kubeletKubeconfig, apiURL := n.cfg.Paths.KubeletKubeconfig, n.cfg.APIServerURL
	n.say("node %s starts on its own client certificate (valid until %s); no token needed", n.cfg.NodeName, expires.UTC().Format(time.RFC3339))
	was, err := pointKubeconfigAt(kubeletKubeconfig, apiURL)
	if err != nil {
		return join.Settings{}, err
	}
	if was != "" {
		n.say("%s named %s: it names %s now", kubeletKubeconfig, was, apiURL)
	}
	settings, servers, err := join.ReadSettings(ctx, kubeletKubeconfig)
	if err != nil {
		return join.Settings{}, err
	}
	return settings, n.checkRelease(servers)
}

// checkRelease refuses an agent whose release cannot work with a server's
// (pkg/version's skew rules), before anything of the join is written. The
// server's own node runs the server's release, which the server checks.
func (n *node) checkRelease(servers map[string]string) error {
	if n.cfg.Embedded {
		return nil
	}
	if err := version.CheckAgent(version.Mine(), servers); err != nil {
		return fmt.Errorf("--server %s: %w (docs/operations.md#upgrades)", n.cfg.Server, err)
	}
	return nil
}

// joinWithToken joins through --server with the token and leaves the
// kubelet a bootstrap kubeconfig that names cfg.APIServerURL. why tells
// why the node's own credentials would not do.
func (n *node) joinWithToken(ctx context.Context, why error) (join.Settings, error) {
	cfg, p := n.cfg, n.cfg.Paths
	if cfg.Token == "" {
		return join.Settings{}, fmt.Errorf("--token is empty, and node %s cannot start without one: %v; give a join token (k1m token create on a server, or the server's DATA-DIR/token)", cfg.NodeName, why)
	}
	n.say("joining %s as node %s (%s) with token %s", cfg.Server, cfg.NodeName, cfg.NodeIP, cfg.JoinToken.TokenID())
	found, err := join.Discover(ctx, cfg.Server, cfg.JoinToken)
	if err != nil {
		return join.Settings{}, joinError(cfg.Agent, err)
	}
	if err := n.checkRelease(found.ServerVersions); err != nil {
		return join.Settings{}, err
	}
	if err := forgetCredentials(p); err != nil {
		return join.Settings{}, err
	}
	if err := fsutil.WriteFile(p.CAFile, found.CAPEM, 0o644); err != nil {
		return join.Settings{}, err
	}
	// The kubelet copies this server into the kubeconfig it writes.
	boot := kubeconfig.Build(cfg.APIServerURL, found.CAPEM, "kubelet-bootstrap", kubeconfig.Credentials{Token: cfg.JoinToken.Secret})
	return found.Settings, kubeconfig.Write(p.BootstrapKubeconfig, boot)
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

// finishBootstrap waits, on a join, for the certificate the kubelet asks
// for with the token: the kubelet writes its kubeconfig first, then gets
// the certificate it names once k1m's approver approved its CSR and
// kube-controller-manager signed it. From then on the node lives on that
// certificate (the kubelet rotates it): the token is not kept.
func (n *node) finishBootstrap(ctx context.Context) error {
	p := n.cfg.Paths
	if n.bootstrapping {
		if err := waitForFile(ctx, p.KubeletClientCert, n.cfg.Timings.TLSBootstrap, n.kubelet); err != nil {
			return fmt.Errorf("the kubelet got no client certificate (TLS bootstrap; k1m kubectl get csr shows whether the server denied it and why): %w", err)
		}
		if err := os.Remove(p.BootstrapKubeconfig); err != nil {
			return err
		}
		n.say("node %s joined: it runs on its own client certificate now, and the join token is not kept", n.cfg.NodeName)
	}
	// Joined or resumed, the node needs no join credential from now on
	// (a reinstall writes the token file again for a node that has its
	// certificate already).
	return forgetTokenFile(n.cfg.TokenFile, n.out)
}

// forgetTokenFile deletes --token-file when there is one.
func forgetTokenFile(path string, out io.Writer) error {
	if path == "" {
		return nil
	}
	removed, err := fsutil.RemoveIfPresent(path)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if removed {
		fmt.Fprintf(out, "k1m agent: deleted --token-file %s\n", path)
	}
	return nil
}

// waitForFile waits for path to appear while the component behind it runs.
func waitForFile(ctx context.Context, path string, timeout time.Duration, component <-chan error) error {
	return poll.Until(ctx, 500*time.Millisecond, timeout, path+" written", func(context.Context) error {
		select {
		case err := <-component:
			return poll.Stop(err)
		default:
		}
		_, err := os.Stat(path)
		return err
	})
}
