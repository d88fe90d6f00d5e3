package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/bench/storebytes"
	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/poll"
)

// storeNamespace holds the store scenario's workload.
const storeNamespace = "k1m-bench-store"

// Timeouts of the store scenario's waits.
const (
	storeRunTimeout  = 5 * time.Minute
	storePollEvery   = 2 * time.Second
	etcdReadDeadline = 2 * time.Minute
)

// runStore measures the bytes a real cluster's objects take in its etcd
// groups (two, and one per store partition with --server-args
// --etcd-partitions=...): one k1m server and its agents, real kubelets running a
// workload of pause pods in Deployments with Services. The figures are
// k1m's: the stock build stores the same objects in one group.
func runStore(ctx context.Context, o Options, rep *Report) error {
	cfg := o.Store
	clusterDir := filepath.Join(o.Results, "runs", "store-k1m-1")
	fmt.Fprintf(o.Progress, "store: bringing up one `k1m server` and %d agents (logs in %s)\n", cfg.Agents, clusterDir)
	shape := scaleout.Shape{Name: "store-k1m", Servers: 1, Agents: cfg.Agents, K1M: o.Deployed.Binary(deployed.K1m), ServerArgs: o.ServerArgs}
	so := scaleout.Options{ImagesDir: o.Deployed.ImagesDir, DataRoot: o.Deployed.DataRoot}
	return scaleout.WithShape(ctx, shape, so, clusterDir, o.Progress, func(c *scaleout.Cluster) error {
		res, err := measureStore(ctx, o, c)
		rep.Store = res
		return errors.Join(err, rep.writeData())
	})
}

func measureStore(ctx context.Context, o Options, c *scaleout.Cluster) (*storebytes.Result, error) {
	cfg := o.Store
	progress := func(format string, args ...any) { fmt.Fprintf(o.Progress, "  store: "+format+"\n", args...) }
	client, err := kubernetes.NewForConfig(c.Config(1))
	if err != nil {
		return nil, err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	classifier := storebytes.Classifier{Nodes: map[string]bool{}, Namespace: storeNamespace}
	for _, n := range nodes.Items {
		classifier.Nodes[n.Name] = true
	}
	progress("%d nodes; creating %d pause pods in Deployments of %d, each with a Service", len(nodes.Items), cfg.Pods(), cfg.PodsPerDeployment)
	if err := createStoreWorkload(ctx, client, cfg); err != nil {
		return nil, err
	}
	if err := waitStoreWorkload(ctx, client, cfg.Pods(), progress); err != nil {
		return nil, err
	}
	stores, err := openStores(ctx, c.DataDir(1))
	if err != nil {
		return nil, err
	}
	defer stores.close()
	res := &storebytes.Result{Config: cfg, Nodes: len(nodes.Items), Pods: cfg.Pods()}
	progress("counting revisions at rest over %v", cfg.Idle)
	if err := stores.idle(ctx, cfg.Idle, classifier, res); err != nil {
		return res, err
	}
	for i := range res.Stores {
		s := &res.Stores[i]
		rctx, cancel := context.WithTimeout(ctx, etcdReadDeadline)
		kinds, _, err := storebytes.ReadKinds(rctx, stores.clients[i], s.Store, classifier)
		if err == nil {
			s.After, err = storebytes.CompactAndDefragment(rctx, stores.clients[i], stores.endpoints[i])
		}
		cancel()
		if err != nil {
			return res, err
		}
		res.Kinds = append(res.Kinds, kinds...)
		progress("%s store: %d revisions in %v at rest; file %.1f MiB, %.1f MiB after compaction and defragmentation",
			s.Store, s.Revisions, s.Idle, float64(s.Before.Size)/(1<<20), float64(s.After.Size)/(1<<20))
	}
	return res, nil
}

// createStoreWorkload creates the namespace, then each Deployment and
// its Service (clusterload's objects, on the real nodes, running pause).
func createStoreWorkload(ctx context.Context, client kubernetes.Interface, cfg storebytes.Config) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", storeNamespace, err)
	}
	for k := 0; k < cfg.Pods()/cfg.PodsPerDeployment; k++ {
		name := fmt.Sprintf("app-%04d", k)
		d := clusterload.NewDeployment(storeNamespace, name, int32(cfg.PodsPerDeployment))
		spec := &d.Spec.Template.Spec
		spec.NodeSelector = nil
		spec.Containers[0].Image = airgap.PauseImage
		spec.Containers[0].ImagePullPolicy = corev1.PullNever
		if _, err := client.CoreV1().Services(storeNamespace).Create(ctx, clusterload.NewService(storeNamespace, name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Service %s/%s: %w", storeNamespace, name, err)
		}
		if _, err := client.AppsV1().Deployments(storeNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s/%s: %w", storeNamespace, name, err)
		}
	}
	return nil
}

// waitStoreWorkload waits until every pod runs, ready, and the Services'
// EndpointSlices hold every pod as a ready endpoint.
func waitStoreWorkload(ctx context.Context, client kubernetes.Interface, pods int, progress func(string, ...any)) error {
	last := ""
	return poll.Until(ctx, storePollEvery, storeRunTimeout, fmt.Sprintf("%d pods of %s running and ready, each a ready endpoint", pods, storeNamespace), func(ctx context.Context) error {
		ready, endpoints, err := storeWorkloadState(ctx, client)
		if err != nil {
			return err
		}
		if now := fmt.Sprintf("%d/%d pods ready, %d ready endpoints", ready, pods, endpoints); now != last {
			progress("%s", now)
			last = now
		}
		if ready < pods || endpoints < pods {
			return errors.New(last)
		}
		return nil
	})
}

func storeWorkloadState(ctx context.Context, client kubernetes.Interface) (ready, endpoints int, err error) {
	pods, err := client.CoreV1().Pods(storeNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	slices, err := client.DiscoveryV1().EndpointSlices(storeNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if isReady(e) {
				endpoints++
			}
		}
	}
	return ready, endpoints, nil
}

func isReady(e discoveryv1.Endpoint) bool { return e.Conditions.Ready != nil && *e.Conditions.Ready }

// etcdStores are clients of the lone server's two etcd groups.
type etcdStores struct {
	names     []string
	endpoints []string
	quotas    []int64
	clients   []*clientv3.Client
}

// openStores connects to the server's durable and no-fsync members and
// its member of every store partition the durable etcd records, as its
// kube-apiserver does (the server's etcd client certificate).
func openStores(ctx context.Context, dataDir string) (*etcdStores, error) {
	def := config.DefaultServer()
	tls := etcd.ClientTLSIn(datadir.Server(dataDir).TLS())
	s := &etcdStores{}
	add := func(name string, port int, quota int64) error {
		url := "https://" + net.JoinHostPort("::1", strconv.Itoa(port))
		cli, err := etcd.NewClient([]string{url}, tls)
		if err != nil {
			return fmt.Errorf("a client of %s: %w", url, err)
		}
		s.names, s.quotas = append(s.names, name), append(s.quotas, quota)
		s.endpoints, s.clients = append(s.endpoints, url), append(s.clients, cli)
		return nil
	}
	if err := errors.Join(add("durable", def.EtcdPort, def.EtcdQuotaBytes), add("no-fsync", def.NoFsyncEtcdPort, etcd.DefaultQuotaBytes)); err != nil {
		s.close()
		return nil, err
	}
	layout, _, err := etcd.ReadLayout(ctx, s.clients[0])
	if err != nil {
		s.close()
		return nil, err
	}
	for _, name := range layout.Partitions {
		p, _ := constants.StorePartitionNamed(name)
		if err := add(name, def.EtcdPort+p.PortOffset, def.EtcdQuotaBytes); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *etcdStores) close() {
	for _, c := range s.clients {
		c.Close()
	}
}

// idle counts the revisions each store writes over d with the cluster
// at rest, by kind and class; the file at the end is the store's file
// before compaction.
func (s *etcdStores) idle(ctx context.Context, d time.Duration, c storebytes.Classifier, res *storebytes.Result) error {
	start := make([]storebytes.File, len(s.clients))
	writes := make([]*storebytes.Writes, len(s.clients))
	defer func() {
		for _, w := range writes {
			if w != nil {
				w.Stop(0)
			}
		}
	}()
	began := time.Now()
	for i, cli := range s.clients {
		f, err := storebytes.Status(ctx, cli, s.endpoints[i])
		if err != nil {
			return err
		}
		start[i], writes[i] = f, storebytes.WatchWrites(ctx, cli, s.names[i], c, f.Revision)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	took := time.Since(began)
	for i, cli := range s.clients {
		f, err := storebytes.Status(ctx, cli, s.endpoints[i])
		if err != nil {
			return err
		}
		written, err := writes[i].Stop(f.Revision)
		writes[i] = nil
		if err != nil {
			return err
		}
		res.Stores = append(res.Stores, storebytes.Store{Store: s.names[i], Quota: s.quotas[i], Revisions: f.Revision - start[i].Revision,
			Idle: took, Written: written, Before: f})
	}
	return nil
}
