package podnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options are k1m-cni's settings: the pod network of one node, run as a
// DaemonSet pod (kind node image) rather than inside k1m agent.
type Options struct {
	NodeName    string
	ConfDir     string
	IPAMDir     string
	APIEndpoint string // host:port of kube-apiserver; empty: the in-cluster Service
}

// AddFlags registers the options; defaults come from the environment the
// DaemonSet sets (NODE_NAME from the downward API, CONTROL_PLANE_ENDPOINT
// from kind).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	fs.StringVar(&o.ConfDir, "cni-conf-dir", "/etc/cni/net.d", "where the CNI config is written (absolute path)")
	fs.StringVar(&o.IPAMDir, "ipam-dir", "/var/lib/cni/k1m", "host-local's data directory (absolute path)")
	fs.StringVar(&o.APIEndpoint, "api-endpoint", os.Getenv("CONTROL_PLANE_ENDPOINT"), "kube-apiserver as host:port, reached before kube-proxy programs the Service (default $CONTROL_PLANE_ENDPOINT, else the in-cluster Service)")
}

// Validate names the flag and the valid form of the first bad option.
func (o Options) Validate() error {
	if o.NodeName == "" {
		return errors.New("--node-name is empty: set it or NODE_NAME (the DaemonSet passes spec.nodeName)")
	}
	for flag, dir := range map[string]string{"--cni-conf-dir": o.ConfDir, "--ipam-dir": o.IPAMDir} {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%s %q: want an absolute path", flag, dir)
		}
	}
	if o.APIEndpoint != "" {
		if _, _, err := net.SplitHostPort(o.APIEndpoint); err != nil {
			return fmt.Errorf("--api-endpoint %q: want host:port, e.g. [fc00::2]:6443 or k1m-control-plane:6443", o.APIEndpoint)
		}
	}
	return nil
}

// RESTConfig is the in-cluster config (the pod's service account), pointed
// at APIEndpoint when it is set.
func (o Options) RESTConfig() (*rest.Config, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("k1m-cni runs in a pod with a service account: %w", err)
	}
	if o.APIEndpoint != "" {
		cfg.Host = "https://" + o.APIEndpoint
	}
	return cfg, nil
}

// Client is a client of the API from the validated options.
func (o Options) Client() (kubernetes.Interface, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// RunDaemon configures forwarding, then keeps the node's pod network in
// line with the nodes until ctx ends.
func RunDaemon(ctx context.Context, o Options) error {
	client, err := o.Client()
	if err != nil {
		return err
	}
	if err := EnableForwarding(); err != nil {
		return err
	}
	Network{Self: o.NodeName, ConfDir: o.ConfDir, IPAMDir: o.IPAMDir}.Run(ctx, client)
	<-ctx.Done()
	return nil
}
