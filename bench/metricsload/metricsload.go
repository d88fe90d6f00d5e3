// Package metricsload measures metrics-server, the one component whose
// cost grows with the nodes by design: each replica scrapes every node's
// kubelet once per resolution. On a fresh one-server cluster, simulated
// nodes are registered in steps, each with a kubelet resource metrics
// endpoint of its own (bench/kubeletsim) serving its pods' metrics, and
// their Leases renewed (bench/nodesim). After metrics-server has scraped
// every node of a step twice, a window of whole resolutions reads its
// process's CPU and memory, the scrapes it made, its scrape cycles'
// duration (metrics_server_manager_tick_duration_seconds) and failed
// kubelet requests, and the Metrics API's node count. The CPU per scrape
// gives the node count one core keeps within the resolution.
package metricsload

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/apimetrics"
	"k1m.dev/k1m/bench/kubeletsim"
	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/clock"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/poll"
)

// Defaults of the scenario: 30 pods a node, as the sizing table's.
var DefaultSteps = []int{1000, 2000, 4000}

const (
	DefaultPodsPerNode = 30
	DefaultPeriods     = 4
	// FirstPort is node 0's kubelet endpoint; node i's is FirstPort+i,
	// below the ephemeral ports from 32768.
	FirstPort = 20000
)

// metrics-server as manifests/metrics-server.yaml deploys it.
const (
	// Resolution is its --metric-resolution.
	Resolution = 15 * time.Second
	// RequestTimeout is its kubelet request timeout (upstream's default
	// --kubelet-request-timeout): a scrape that waits longer fails.
	RequestTimeout = 10 * time.Second
	namespace      = "kube-system"
	selector       = "k8s-app=metrics-server"
	process        = "metrics-server"
	securePort     = 10250
)

// Timeouts.
const (
	ReadyTimeout = 3 * time.Minute
	// scrapedTimeout bounds the wait for every node of a step scraped
	// twice, with a margin for the node informer to see the new Nodes.
	scrapedTimeout  = 4 * Resolution
	registerWorkers = 50
	// scrapedTwice: the first scrape of a node gives metrics-server one
	// point; a rate needs two.
	scrapedTwice = 2
)

// Config is the scenario's size.
type Config struct {
	Steps       []int // simulated node counts, ascending
	PodsPerNode int
	Periods     int // the window, in resolutions
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	errs := []error{stats.CheckAscending("--metrics-nodes", "node counts", "1000,2000", c.Steps)}
	if n := len(c.Steps); n > 0 && FirstPort+c.Steps[n-1] > 32768 {
		errs = append(errs, fmt.Errorf("--metrics-nodes up to %d: want at most %d, one kubelet port a node from %d below the ephemeral ports", c.Steps[n-1], 32768-FirstPort, FirstPort))
	}
	if c.PodsPerNode < 1 {
		errs = append(errs, fmt.Errorf("--metrics-pods-per-node %d: want at least 1, e.g. %d", c.PodsPerNode, DefaultPodsPerNode))
	}
	if c.Periods < 1 {
		errs = append(errs, fmt.Errorf("--metrics-periods %d: want at least 1 resolution (%v), e.g. %d", c.Periods, Resolution, DefaultPeriods))
	}
	return errors.Join(errs...)
}

// Env is the cluster a run measures.
type Env struct {
	Config  *rest.Config // an admin client of the server's API server
	DataDir string       // the server's, for its kubelet serving CA
	// HostAddr is where the simulated kubelets serve, reachable from the
	// pods; when it is not valid, the server's own node's InternalIP (a
	// lone server in this machine's network namespace).
	HostAddr netip.Addr
	Progress func(string)
}

// Run measures every step of cfg, returning the steps measured so far
// when one fails.
func Run(ctx context.Context, cfg Config, env Env) ([]Step, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	env.Progress("waiting for metrics-server")
	ms, err := waitReady(ctx, client)
	if err != nil {
		return nil, err
	}
	if !env.HostAddr.IsValid() {
		if env.HostAddr, err = serverNodeAddr(ctx, client); err != nil {
			return nil, err
		}
	}
	cert, err := servingCert(env.DataDir, env.HostAddr)
	if err != nil {
		return nil, err
	}
	endpoints := kubeletsim.New(kubeletsim.Config{Addr: env.HostAddr, FirstPort: FirstPort, PodsPerNode: cfg.PodsPerNode}, cert)
	defer endpoints.Close()
	sim, err := nodesim.New(env.Config, nodesim.Defaults())
	if err != nil {
		return nil, err
	}
	go sim.Run(ctx)
	idle, err := readMetricsServer(ctx, env.Config, ms)
	if err != nil {
		return nil, err
	}
	r := run{cfg: cfg, env: env, client: client, ms: ms, endpoints: endpoints, sim: sim, idleRSS: idle.usage.RSS}
	var steps []Step
	from := 0
	for _, n := range cfg.Steps {
		s, err := r.step(ctx, from, n)
		if err != nil {
			return steps, fmt.Errorf("%d nodes: %w", n, err)
		}
		env.Progress(s.Line())
		steps = append(steps, s)
		from = n
	}
	return steps, nil
}

// metricsServer is the running replica.
type metricsServer struct {
	pid  int
	addr string // its pod's address and secure port
}

// waitReady waits for one ready metrics-server pod and one process of it.
func waitReady(ctx context.Context, client kubernetes.Interface) (metricsServer, error) {
	var ms metricsServer
	err := poll.Until(ctx, time.Second, ReadyTimeout, "one ready metrics-server pod and one process", func(ctx context.Context) error {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || !ready(pods.Items[0]) || pods.Items[0].Status.PodIP == "" {
			return fmt.Errorf("%d metrics-server pods, want one ready with an address", len(pods.Items))
		}
		pids, err := proc.Named(process)
		if err != nil {
			return err
		}
		if len(pids) != 1 {
			return fmt.Errorf("%d %s processes %v, want one", len(pids), process, pids)
		}
		ms = metricsServer{pid: pids[0], addr: net.JoinHostPort(pods.Items[0].Status.PodIP, strconv.Itoa(securePort))}
		return nil
	})
	return ms, err
}

func ready(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.DeletionTimestamp == nil && c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serverNodeAddr is the InternalIP of the cluster's one real node.
func serverNodeAddr(ctx context.Context, client kubernetes.Interface) (netip.Addr, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!" + SimulatedLabel})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("listing the nodes: %w", err)
	}
	if len(nodes.Items) != 1 {
		return netip.Addr{}, fmt.Errorf("%d nodes before the simulated ones, want the server's own", len(nodes.Items))
	}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return netip.ParseAddr(a.Address)
		}
	}
	return netip.Addr{}, fmt.Errorf("node %s has no InternalIP", nodes.Items[0].Name)
}

// servingCert is a serving certificate for addr signed by the server's
// kubelet serving CA, which metrics-server checks kubelets with.
func servingCert(dataDir string, addr netip.Addr) (tls.Certificate, error) {
	ca, err := pki.LoadCA(datadir.Server(dataDir).TLS(), constants.KubeletServingCA)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "system:node:k1m-bench-simulated", Organization: []string{"system:nodes"},
		IPs: []net.IP{addr.AsSlice()}, Server: true})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issuing the simulated kubelets' serving certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

type run struct {
	cfg       Config
	env       Env
	client    kubernetes.Interface
	ms        metricsServer
	endpoints *kubeletsim.Endpoints
	sim       *nodesim.Simulator
	idleRSS   int64
}

// step registers nodes from to to-1, waits until metrics-server has
// scraped each twice, then reads a window of whole resolutions.
func (r *run) step(ctx context.Context, from, to int) (Step, error) {
	s := Step{Nodes: to, PodsPerNode: r.cfg.PodsPerNode, Window: time.Duration(r.cfg.Periods) * Resolution}
	r.env.Progress(fmt.Sprintf("%d nodes: registering %d to %d, each with a kubelet endpoint of %d pods", to, from+1, to, r.cfg.PodsPerNode))
	if err := r.endpoints.Add(to); err != nil {
		return s, err
	}
	node := func(i int) *corev1.Node { return SimulatedNode(i, r.env.HostAddr, r.endpoints.Port(i)) }
	if err := leaseflood.RegisterNodesAs(ctx, r.client, from, to, registerWorkers, node); err != nil {
		return s, err
	}
	r.sim.Add(to)
	if err := r.endpoints.Wait(ctx, to, scrapedTwice, scrapedTimeout); err != nil {
		return s, err
	}
	before, err := r.read(ctx)
	if err != nil {
		return s, err
	}
	if err := clock.Sleep(ctx, s.Window); err != nil {
		return s, err
	}
	after, err := r.read(ctx)
	if err != nil {
		return s, err
	}
	s.fill(before, after, r.idleRSS)
	if s.NodesWithMetrics, err = metricsAPINodes(ctx, r.client); err != nil {
		return s, err
	}
	return s, nil
}

// reading is the state at one edge of a window.
type reading struct {
	at      time.Time
	scrapes int64 // the simulated endpoints served
	metricsServerReading
	bench time.Duration // this process's CPU
}

// metricsServerReading is metrics-server's own state.
type metricsServerReading struct {
	usage   proc.Usage
	metrics apimetrics.Snapshot
}

func (r *run) read(ctx context.Context) (reading, error) {
	ms, err := readMetricsServer(ctx, r.env.Config, r.ms)
	if err != nil {
		return reading{}, err
	}
	var scrapes int64
	for _, n := range r.endpoints.Scrapes() {
		scrapes += n
	}
	self, err := proc.SelfCPU()
	if err != nil {
		return reading{}, err
	}
	return reading{at: time.Now(), scrapes: scrapes, metricsServerReading: ms, bench: self}, nil
}

func readMetricsServer(ctx context.Context, cfg *rest.Config, ms metricsServer) (metricsServerReading, error) {
	usage, err := proc.ReadUsage(ms.pid)
	if err != nil {
		return metricsServerReading{}, fmt.Errorf("metrics-server's process %d: %w", ms.pid, err)
	}
	// Its /metrics, straight to the pod with the admin's certificate:
	// metrics-server authenticates it with the cluster's client CA.
	m, err := apimetrics.ScrapeComponent(ctx, cfg, ms.addr)
	if err != nil {
		return metricsServerReading{}, err
	}
	return metricsServerReading{usage: usage, metrics: m}, nil
}

// metricsAPINodes counts the nodes the Metrics API has a sample of.
func metricsAPINodes(ctx context.Context, client kubernetes.Interface) (int, error) {
	var list struct {
		Items []struct{} `json:"items"`
	}
	// JSON: the client asks for protobuf, which the Metrics API serves.
	body, err := client.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing the Metrics API's nodes: %w", err)
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, fmt.Errorf("the Metrics API's nodes: %w", err)
	}
	return len(list.Items), nil
}

// SimulatedNode is simulated node i as a kubelet registers it, with its
// kubelet endpoint at addr and port.
func SimulatedNode(i int, addr netip.Addr, port int) *corev1.Node {
	n := leaseflood.NewNode(leaseflood.ObjectName(i), i, time.Now())
	n.Labels[SimulatedLabel] = "metrics"
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr.String()}, {Type: corev1.NodeHostName, Address: n.Name}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	return n
}

// SimulatedLabel marks the simulated nodes.
const SimulatedLabel = "k1m.dev/bench-metrics"
