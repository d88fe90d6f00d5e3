// Package controlplane starts the control plane a benchmark measures, one
// process per component so each one's CPU and memory can be read: etcd
// (durable, plus a no-fsync one for Leases and Events when the variant asks
// for it), kube-apiserver and, for the node scenarios,
// kube-controller-manager. Stock and k1m variants get the same flags except
// the ones the variant names, so the comparison is of the builds and the
// etcd layout only.
package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/poll"
)

// Ports used by a benchmark control plane: away from a running k1m
// cluster's (6443, 2379, 2381), so a benchmark does not collide with it.
const (
	DurableEtcdPort = 23790
	NoFsyncEtcdPort = 23792
	APIServerPort   = 26443
)

// ServiceCIDR is given to every variant: stock's default is IPv4.
const ServiceCIDR = constants.DefaultServiceCIDR

// Variant is one build and layout under test.
type Variant struct {
	Name           string
	BinDir         string   // holds kube-apiserver and kube-controller-manager
	FeatureGates   string   // kube-apiserver --feature-gates, e.g. BtreeWatchCache=false
	NoFsyncLeases  bool     // Leases and Events in a second, no-fsync etcd
	Env            []string // extra environment of every process, e.g. GOGC=800
	ControllerArgs []string // extra kube-controller-manager flags (lease timings)
}

// Options of a start.
type Options struct {
	Dir               string // work directory; wiped first
	Self              string // this benchmark binary, run as `Self etcd ...` for etcd
	ControllerManager bool   // also start kube-controller-manager (node lifecycle)
}

// ControlPlane is a running set of processes.
type ControlPlane struct {
	Variant    Variant
	Etcd       *proc.Process // durable
	NoFsync    *proc.Process // nil unless Variant.NoFsyncLeases
	APIServer  *proc.Process
	Controller *proc.Process // nil unless Options.ControllerManager
	Config     *rest.Config  // admin client, no client-side rate limit, protobuf
	Kubeconfig string
	EtcdTLS    EtcdTLS
	dir        string
}

// EtcdTLS are the files a client of the benchmark's etcd uses.
type EtcdTLS struct{ CA, Cert, Key string }

// Processes lists the running processes.
func (cp *ControlPlane) Processes() []*proc.Process {
	var out []*proc.Process
	for _, p := range []*proc.Process{cp.Etcd, cp.NoFsync, cp.APIServer, cp.Controller} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// EtcdMembers lists the running etcd processes (durable, then no-fsync).
func (cp *ControlPlane) EtcdMembers() []*proc.Process {
	if cp.NoFsync == nil {
		return []*proc.Process{cp.Etcd}
	}
	return []*proc.Process{cp.Etcd, cp.NoFsync}
}

// Discard stops every process and removes the etcd data, keeping the logs.
func (cp *ControlPlane) Discard() {
	cp.Stop()
	DropEtcdData(cp.dir)
}

// DropEtcdData removes the etcd data directories under a control plane's
// work directory: gigabytes after a flood, worthless once measured.
func DropEtcdData(dir string) {
	for _, name := range []string{"etcd", "etcd-nofsync"} {
		os.RemoveAll(filepath.Join(dir, name))
	}
}

// Stop stops every process, the API server first.
func (cp *ControlPlane) Stop() {
	for _, p := range []*proc.Process{cp.Controller, cp.APIServer, cp.NoFsync, cp.Etcd} {
		if p != nil {
			p.Stop()
		}
	}
}

// EtcdURL is the client URL of the etcd on port.
func EtcdURL(port int) string {
	return "https://" + net.JoinHostPort("::1", strconv.Itoa(port))
}

// Start brings the variant up and waits until kube-apiserver is ready.
func Start(ctx context.Context, v Variant, o Options) (cp *ControlPlane, err error) {
	for _, bin := range []string{"kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(v.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("variant %s: %s not found in %s: build it first (make build / make build-stock)", v.Name, bin, v.BinDir)
		}
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, err
	}
	f, err := newFiles(o.Dir)
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{Variant: v, dir: o.Dir, Kubeconfig: f.kubeconfig, EtcdTLS: EtcdTLS{CA: f.ca, Cert: f.etcdClient.cert, Key: f.etcdClient.key}}
	started := cp // the returns below set cp to nil
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	if cp.Etcd, err = startEtcd(ctx, o, v, f, "etcd", DurableEtcdPort, false); err != nil {
		return nil, err
	}
	if v.NoFsyncLeases {
		if cp.NoFsync, err = startEtcd(ctx, o, v, f, "etcd-nofsync", NoFsyncEtcdPort, true); err != nil {
			return nil, err
		}
	}
	args := apiserverArgs(v, f)
	if cp.APIServer, err = proc.Start(ctx, "kube-apiserver", filepath.Join(v.BinDir, "kube-apiserver"), args, v.Env, filepath.Join(o.Dir, "kube-apiserver.log")); err != nil {
		return nil, err
	}
	if cp.Config, err = ClientConfig(f.kubeconfig); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, cp.Config, cp.APIServer); err != nil {
		return nil, fmt.Errorf("variant %s: %w (log %s)", v.Name, err, filepath.Join(o.Dir, "kube-apiserver.log"))
	}
	if o.ControllerManager {
		args := append(controllerArgs(f), v.ControllerArgs...)
		if cp.Controller, err = proc.Start(ctx, "kube-controller-manager", filepath.Join(v.BinDir, "kube-controller-manager"), args, v.Env, filepath.Join(o.Dir, "kube-controller-manager.log")); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// StartEtcd starts one etcd member alone, with its PKI under o.Dir: the
// etcd flood talks to it directly.
func StartEtcd(ctx context.Context, o Options, env []string, noFsync bool) (*proc.Process, EtcdTLS, error) {
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, EtcdTLS{}, err
	}
	f, err := newFiles(o.Dir)
	if err != nil {
		return nil, EtcdTLS{}, err
	}
	p, err := startEtcd(ctx, o, Variant{Env: env}, f, "etcd", DurableEtcdPort, noFsync)
	return p, EtcdTLS{CA: f.ca, Cert: f.etcdClient.cert, Key: f.etcdClient.key}, err
}

func startEtcd(ctx context.Context, o Options, v Variant, f *files, name string, port int, noFsync bool) (*proc.Process, error) {
	args := []string{"etcd", "--name", name, "--data-dir", filepath.Join(o.Dir, name), "--port", strconv.Itoa(port),
		"--ca", f.ca, "--cert", f.etcdServer.cert, "--key", f.etcdServer.key, "--pprof"}
	if noFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	p, err := proc.Start(ctx, name, o.Self, args, v.Env, filepath.Join(o.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	if err := waitPort(ctx, port, p); err != nil {
		return nil, fmt.Errorf("%s: %w (log %s)", name, err, filepath.Join(o.Dir, name+".log"))
	}
	return p, nil
}

func apiserverArgs(v Variant, f *files) []string {
	args := []string{
		"--etcd-servers=" + EtcdURL(DurableEtcdPort),
		"--etcd-cafile=" + f.ca,
		"--etcd-certfile=" + f.etcdClient.cert,
		"--etcd-keyfile=" + f.etcdClient.key,
		"--bind-address=::1",
		"--advertise-address=::1",
		"--secure-port=" + strconv.Itoa(APIServerPort),
		"--tls-cert-file=" + f.apiserver.cert,
		"--tls-private-key-file=" + f.apiserver.key,
		"--token-auth-file=" + f.tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + f.saPub,
		"--service-account-signing-key-file=" + f.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
	}
	if v.NoFsyncLeases {
		url := EtcdURL(NoFsyncEtcdPort)
		args = append(args, "--etcd-servers-overrides="+constants.EtcdServersOverrides(url))
	}
	if v.FeatureGates != "" {
		args = append(args, "--feature-gates="+v.FeatureGates)
	}
	return args
}

// controllerArgs run only the node lifecycle controller: the one that
// marks nodes NotReady when their Leases stop being renewed.
func controllerArgs(f *files) []string {
	return []string{
		"--kubeconfig=" + f.kubeconfig,
		"--controllers=node-lifecycle-controller",
		// Its node lifecycle controller GETs and PATCHes each new Node
		// once: at the default 20 requests/s a ramp step of thousands of
		// nodes would keep it busy for minutes, into the measured windows.
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--leader-elect=false",
		"--secure-port=0",
	}
}

type pair struct{ cert, key string }

// files are the PKI and credentials of one control plane.
type files struct {
	dir, ca                           string
	caPEM                             []byte
	etcdServer, etcdClient, apiserver pair
	saKey, saPub                      string
	token, tokens, kubeconfig         string
}

func newFiles(dir string) (*files, error) {
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.LoadOrCreateCA(tlsDir, "ca", "k1m-bench-ca")
	if err != nil {
		return nil, err
	}
	f := &files{dir: dir, ca: filepath.Join(tlsDir, "ca.crt")}
	if f.caPEM, err = os.ReadFile(f.ca); err != nil {
		return nil, err
	}
	loopback := []net.IP{net.IPv6loopback}
	leaves := []struct {
		into *pair
		leaf pki.Leaf
	}{
		{&f.etcdServer, pki.Leaf{Name: "etcd-server", CommonName: "etcd", Server: true, Client: true, DNSNames: []string{"localhost"}, IPs: loopback}},
		{&f.etcdClient, pki.Leaf{Name: "etcd-client", CommonName: "kube-apiserver-etcd-client", Client: true}},
		{&f.apiserver, pki.Leaf{Name: "apiserver", CommonName: "kube-apiserver", Server: true, DNSNames: []string{"localhost"}, IPs: loopback}},
	}
	for _, l := range leaves {
		if l.into.cert, l.into.key, err = ca.LoadOrIssue(tlsDir, l.leaf); err != nil {
			return nil, err
		}
	}
	if f.saKey, f.saPub, err = pki.LoadOrCreateKey(filepath.Join(tlsDir, "sa.key")); err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	f.token = hex.EncodeToString(secret)
	f.tokens = filepath.Join(dir, "tokens.csv")
	if err := fsutil.WriteFile(f.tokens, []byte(f.token+",k1m-bench,k1m-bench,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	f.kubeconfig = datadir.Server(dir).AdminKubeconfig()
	cfg := kubeconfig.Build("https://"+net.JoinHostPort("::1", strconv.Itoa(APIServerPort)), f.caPEM, "k1m-bench", kubeconfig.Credentials{Token: f.token})
	return f, kubeconfig.Write(f.kubeconfig, cfg)
}

// ClientConfig is the benchmark's client of the API server kubeconfigPath
// names: protobuf like kubelets, and no client-side rate limit, so the
// server is what limits the rate.
func ClientConfig(kubeconfigPath string) (*rest.Config, error) {
	cfg, err := kubeconfig.RESTConfig(kubeconfigPath)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

func waitReady(ctx context.Context, cfg *rest.Config, p *proc.Process) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return poll.Until(ctx, 250*time.Millisecond, 2*time.Minute, "kube-apiserver ready", func(ctx context.Context) error {
		select {
		case <-p.Done():
			return poll.Stop(fmt.Errorf("kube-apiserver exited: %v", p.Err()))
		default:
		}
		return poll.APIServerReady(ctx, client.Discovery().RESTClient())
	})
}

func waitPort(ctx context.Context, port int, p *proc.Process) error {
	addr := net.JoinHostPort("::1", strconv.Itoa(port))
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after 1m", addr)
		}
		select {
		case <-p.Done():
			return fmt.Errorf("exited: %v", p.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
