package clusterload

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/netpol"
	"k1m.dev/k1m/pkg/podnet"
)

// listWatch is one watch a node opens: the list it starts from and the
// watch it follows.
type listWatch struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// nodeWatch is one of the watches every node opens, by who opens it.
type nodeWatch struct {
	Who, What string
	open      func(c kubernetes.Interface, node string) listWatch
}

// proxiedServices is kube-proxy's selector of the Services and
// EndpointSlices it programs (pkg/proxy: headless and other proxies'
// Services left out).
const proxiedServices = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"

func byName(name string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
}

func withLabels(selector string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = selector }
}

// tweaked applies tweak to the options of both calls.
func tweaked(tweak func(*metav1.ListOptions), list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	w func(context.Context, metav1.ListOptions) (watch.Interface, error)) listWatch {
	return listWatch{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return list(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { tweak(&o); return w(ctx, o) },
	}
}

func nodesByName(c kubernetes.Interface, node string) listWatch {
	n := c.CoreV1().Nodes()
	return tweaked(byName(node), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return n.List(ctx, o) }, n.Watch)
}

func services(c kubernetes.Interface, selector string) listWatch {
	s := c.CoreV1().Services("")
	return tweaked(withLabels(selector), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) }, s.Watch)
}

func endpointSlices(c kubernetes.Interface, namespace, selector string) listWatch {
	e := c.DiscoveryV1().EndpointSlices(namespace)
	return tweaked(withLabels(selector), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return e.List(ctx, o) }, e.Watch)
}

// NodeWatches are the watches a node of a k1m cluster opens and keeps
// open (docs/performance.md, "What a node costs the cluster"): the
// kubelet's, kube-proxy's and k1m agent's, with their selectors. The
// kubelet's watches of the ConfigMaps and Secrets its pods mount are left
// out: the pods here mount none.
var NodeWatches = []nodeWatch{
	{"kubelet", "its Node", nodesByName},
	{"kubelet", "its pods", func(c kubernetes.Interface, node string) listWatch {
		p := c.CoreV1().Pods("")
		tweak := func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}
		return tweaked(tweak, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return p.List(ctx, o) }, p.Watch)
	}},
	{"kubelet", "every Service", func(c kubernetes.Interface, _ string) listWatch { return services(c, "") }},
	{"kubelet", "every CSIDriver", func(c kubernetes.Interface, _ string) listWatch {
		d := c.StorageV1().CSIDrivers()
		return listWatch{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return d.List(ctx, o) }, d.Watch}
	}},
	{"kubelet", "every RuntimeClass", func(c kubernetes.Interface, _ string) listWatch {
		r := c.NodeV1().RuntimeClasses()
		return listWatch{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) }, r.Watch}
	}},
	{"kube-proxy", "its Node", nodesByName},
	{"kube-proxy", "the proxied Services", func(c kubernetes.Interface, _ string) listWatch { return services(c, proxiedServices) }},
	{"kube-proxy", "their EndpointSlices", func(c kubernetes.Interface, _ string) listWatch {
		return endpointSlices(c, "", proxiedServices)
	}},
	{"k1m agent", "its Node", nodesByName},
	{"k1m agent", "the pod routes", func(c kubernetes.Interface, _ string) listWatch {
		cm := c.CoreV1().ConfigMaps(podnet.RoutesNamespace)
		return tweaked(withLabels(podnet.RouteLabel), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return cm.List(ctx, o) }, cm.Watch)
	}},
	{"k1m agent", "the cluster settings", func(c kubernetes.Interface, _ string) listWatch {
		cm := c.CoreV1().ConfigMaps(join.PublicNamespace)
		return tweaked(byName(join.SettingsName), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return cm.List(ctx, o) }, cm.Watch)
	}},
	{"k1m agent", "the API servers' EndpointSlices", func(c kubernetes.Interface, _ string) listWatch {
		return endpointSlices(c, metav1.NamespaceDefault, "kubernetes.io/service-name=kubernetes")
	}},
	{"k1m agent", "its NetworkPolicy rules", func(c kubernetes.Interface, node string) listWatch {
		cm := c.CoreV1().ConfigMaps(netpol.Namespace)
		return tweaked(byName(node), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return cm.List(ctx, o) }, cm.Watch)
	}},
}

// podWatch is the index in NodeWatches of the kubelet's watch of its pods,
// which also drives the simulated kubelet.
const podWatch = 1

// rulesWatch is the index in NodeWatches of the k1m agent's watch of its
// NetworkPolicy rules, whose events the fleet counts apart (netpolProbe).
const rulesWatch = 12

// Watch timeouts as client-go's reflector asks for them: 5 to 10 minutes,
// then it watches again from where it was.
const minWatchTimeout = 5 * time.Minute

// fleet is the simulated nodes' watches and their kubelets' pod status
// reports.
type fleet struct {
	via          connector
	perClient    int
	clients      []kubernetes.Interface
	reporter     kubernetes.Interface // the pod status reports' client
	counts                            // of the nodes' watches but rulesWatch
	rules        counts               // of the nodes' rulesWatch watches
	reports      chan *corev1.Pod
	reported     sync.Map // pod UID -> struct{}: reported Running once
	reportErrors atomic.Int64
	podIPs       atomic.Uint64
}

// newFleet is a fleet of no nodes, with workers reporting pod statuses.
func newFleet(ctx context.Context, via connector, nodesPerConnection, workers int, watchList, eagerRetry bool) (*fleet, error) {
	f := &fleet{via: via, perClient: nodesPerConnection, reports: make(chan *corev1.Pod, 1<<16)}
	f.counts.streamed, f.rules.streamed = watchList, watchList
	f.counts.reflectorRetry, f.rules.reflectorRetry = !eagerRetry, !eagerRetry
	reporterCfg, err := via("reporter")
	if err != nil {
		return nil, err
	}
	reporter, err := kubernetes.NewForConfig(ownConnection(reporterCfg))
	if err != nil {
		return nil, err
	}
	f.reporter = reporter
	for w := 0; w < workers; w++ {
		go f.reportWorker(ctx)
	}
	return f, nil
}

// connector is the client config of a connection named after its first
// node: the server's own (direct), or through a balancer (balancers).
type connector func(name string) (*rest.Config, error)

// direct reaches cfg's server itself.
func direct(cfg *rest.Config) connector {
	return func(string) (*rest.Config, error) { return rest.CopyConfig(cfg), nil }
}

// ownConnection is base with a dial function of its own, which gives its
// clients a transport (and connection) of their own: client-go shares
// one per TLS config otherwise.
func ownConnection(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return cfg
}

// client is the connection node i's watches share with its neighbours:
// nodesPerConnection nodes a connection, as many kubelets' streams
// would reach one API server over many connections.
func (f *fleet) client(i int) (kubernetes.Interface, error) {
	for len(f.clients) <= i/f.perClient {
		cfg, err := f.via(leaseflood.ObjectName(len(f.clients) * f.perClient))
		if err != nil {
			return nil, err
		}
		c, err := kubernetes.NewForConfig(ownConnection(cfg))
		if err != nil {
			return nil, err
		}
		f.clients = append(f.clients, c)
	}
	return f.clients[i/f.perClient], nil
}

// add opens every NodeWatches watch of nodes from to to-1.
func (f *fleet) add(ctx context.Context, from, to int) error {
	for i := from; i < to; i++ {
		c, err := f.client(i)
		if err != nil {
			return err
		}
		name := leaseflood.ObjectName(i)
		for k, w := range NodeWatches {
			var onEvent func(watch.Event)
			if k == podWatch {
				onEvent = func(ev watch.Event) { f.onPod(name, ev) }
			}
			counted := &f.counts
			if k == rulesWatch {
				counted = &f.rules
			}
			go counted.follow(ctx, w.open(c, name), onEvent)
		}
	}
	return nil
}

// The counts of every node watch, rulesWatch's included (the embedded
// counts leave them out).
func (f *fleet) totalSynced() int64    { return f.counts.synced.Load() + f.rules.synced.Load() }
func (f *fleet) totalEvents() int64    { return f.counts.events.Load() + f.rules.events.Load() }
func (f *fleet) totalRelists() int64   { return f.counts.relists.Load() + f.rules.relists.Load() }
func (f *fleet) totalRecovered() int64 { return f.counts.recovered.Load() + f.rules.recovered.Load() }
func (f *fleet) totalDown() int64      { return f.counts.down.Load() + f.rules.down.Load() }

// counts are what a set of followed watches did.
type counts struct {
	synced  atomic.Int64 // watches that have listed once
	events  atomic.Int64 // events received
	relists atomic.Int64
	// recovered counts a watch's first successful list or watch call
	// after a failed one: it is back after its server went away, by a
	// relist or by resuming from the version it had.
	recovered atomic.Int64
	// down counts the watches failed and not back yet.
	down atomic.Int64
	// streamed: lists are streamed (Config.WatchList), not LISTs.
	streamed bool
	// reflectorRetry: a failed list or watch is retried after client-go's
	// reflector backoff (followAsReflector), not after a jittered second
	// (Config.EagerRetry).
	reflectorRetry bool
	// newBackoff, when set, replaces reflectorBackoff (tests).
	newBackoff func() wait.BackoffManager
}

// follow lists, then watches from the list's version, watching again
// from the last version seen when a watch ends or its call fails, and
// listing again only when that version is gone, as client-go's reflector
// does, until ctx ends; its retries wait as f's retry policy says.
// Objects are decoded and counted, not kept: only onEvent (when set) sees
// them.
func (f *counts) follow(ctx context.Context, lw listWatch, onEvent func(watch.Event)) {
	retry := f.retryPolicy()
	first, down := true, false
	for ctx.Err() == nil {
		listFailed := f.listAndWatch(ctx, lw, onEvent, retry, &first, &down)
		retry.beforeList(ctx, listFailed)
	}
}

// listAndWatch lists once and watches until the version is gone or a
// watch call fails for good (retry.watchAgain); it tells whether the
// list itself failed.
func (f *counts) listAndWatch(ctx context.Context, lw listWatch, onEvent func(watch.Event), retry retryPolicy, first, down *bool) bool {
	rv, stream, err := f.listOnce(ctx, lw, onEvent)
	if err != nil {
		f.fail(down)
		return true
	}
	f.up(down)
	if *first {
		f.synced.Add(1)
		*first = false
	} else {
		f.relists.Add(1)
	}
	if stream != nil {
		// The streamed list's watch goes on, as the reflector's does.
		var gone bool
		rv, gone = f.drain(stream, rv, onEvent)
		stream.Stop()
		if gone {
			f.fail(down)
			return false
		}
	}
	f.watchFrom(ctx, lw, rv, onEvent, retry, down)
	return false
}

// listOnce lists (or streams the list of) what lw watches, hands each
// object to onEvent as Added, and returns the list's version and, for a
// streamed list, its watch, still open.
func (f *counts) listOnce(ctx context.Context, lw listWatch, onEvent func(watch.Event)) (string, watch.Interface, error) {
	if f.streamed {
		return streamList(ctx, lw, onEvent)
	}
	list, err := lw.list(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", nil, err
	}
	listed, _ := meta.ListAccessor(list)
	if onEvent != nil {
		items, _ := meta.ExtractList(list)
		for _, o := range items {
			onEvent(watch.Event{Type: watch.Added, Object: o})
		}
	}
	return listed.GetResourceVersion(), nil, nil
}

// streamList is a list streamed as client-go's reflector streams it
// under the WatchListClient gate (KEP-3157): a watch that sends the
// current objects as Added events, then a bookmark marking their end
// with the version they make. It returns that version and the watch,
// which goes on with the changes after it.
func streamList(ctx context.Context, lw listWatch, onEvent func(watch.Event)) (string, watch.Interface, error) {
	sendInitialEvents := true
	timeout := int64((minWatchTimeout + time.Duration(rand.Int64N(int64(minWatchTimeout)))).Seconds())
	w, err := lw.watch(ctx, metav1.ListOptions{SendInitialEvents: &sendInitialEvents, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
	if err != nil {
		return "", nil, err
	}
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			w.Stop()
			return "", nil, fmt.Errorf("streaming the list: %v", apierrors.FromObject(ev.Object))
		case watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return m.GetResourceVersion(), w, nil
			}
		default:
			if onEvent != nil {
				onEvent(ev)
			}
		}
	}
	w.Stop()
	return "", nil, fmt.Errorf("streaming the list: the watch ended before its initial events did")
}

// up counts a watch back after a failure.
func (f *counts) up(down *bool) {
	if *down {
		f.recovered.Add(1)
		f.down.Add(-1)
		*down = false
	}
}

// fail marks a watch failed: down until up.
func (f *counts) fail(down *bool) {
	if !*down {
		f.down.Add(1)
		*down = true
	}
}

// watchFrom watches from rv until the version is gone, or a watch call
// fails and retry says to list again.
func (f *counts) watchFrom(ctx context.Context, lw listWatch, rv string, onEvent func(watch.Event), retry retryPolicy, down *bool) {
	for ctx.Err() == nil {
		timeout := int64((minWatchTimeout + time.Duration(rand.Int64N(int64(minWatchTimeout)))).Seconds())
		w, err := lw.watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		if err != nil {
			// Interrupted: back at the next successful list or watch.
			f.fail(down)
			if !retry.watchAgain(ctx, err) {
				return
			}
			continue
		}
		wasDown := *down
		f.up(down)
		var gone bool
		rv, gone = f.drain(w, rv, onEvent)
		w.Stop()
		if gone {
			// The version is gone (410 in the stream): the watch is back
			// only once it has listed again.
			if wasDown {
				f.recovered.Add(-1)
			}
			f.fail(down)
			return
		}
	}
}

// drain reads w to its end; it returns the last version seen and whether
// the watch ended in an error (410 Gone or another: list again).
func (f *counts) drain(w watch.Interface, rv string, onEvent func(watch.Event)) (string, bool) {
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			return rv, true
		}
		if m, err := meta.Accessor(ev.Object); err == nil {
			rv = m.GetResourceVersion()
		}
		if ev.Type == watch.Bookmark {
			continue
		}
		f.events.Add(1)
		if onEvent != nil {
			onEvent(ev)
		}
	}
	return rv, false
}

func sleepJittered(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d/2 + time.Duration(rand.Int64N(int64(d))))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// onPod is the simulated kubelet of node: a pod bound to it that is not
// running yet is reported Running (the container runtime's part, image
// pull included, taking no time: the SLO leaves image pulls out).
func (f *fleet) onPod(node string, ev watch.Event) {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == watch.Deleted || pod.Spec.NodeName != node || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodRunning {
		return
	}
	if _, done := f.reported.LoadOrStore(pod.UID, struct{}{}); done {
		return
	}
	f.reports <- pod
}

func (f *fleet) reportWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pod := <-f.reports:
			err := f.reportRunning(ctx, f.reporter, pod)
			if err != nil && ctx.Err() == nil {
				f.reportErrors.Add(1)
				if !apierrors.IsNotFound(err) {
					f.reported.Delete(pod.UID) // the next event of the pod tries again
				}
			}
		}
	}
}

// reportRunning is the kubelet's status update of a pod whose container
// started: a strategic merge patch of pods/status.
func (f *fleet) reportRunning(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	patch, err := RunningPatch(pod, f.nextPodIP(), time.Now())
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// podIPBase is where the simulated pods' addresses are taken from, one
// each in turn (the simulated nodes have no pod network).
var podIPBase = netip.MustParseAddr("fd00:20::")

func (f *fleet) nextPodIP() string {
	a := podIPBase.As16()
	n := f.podIPs.Add(1)
	for i := 15; i >= 8 && n > 0; i-- {
		a[i] = byte(n)
		n >>= 8
	}
	return netip.AddrFrom16(a).String()
}

// RunningPatch is the status a kubelet reports for pod once its one
// container runs at ip: phase Running, the pod's conditions true, the
// container running and ready.
func RunningPatch(pod *corev1.Pod, ip string, now time.Time) ([]byte, error) {
	t := metav1.NewTime(now)
	var conditions []corev1.PodCondition
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		conditions = append(conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: t})
	}
	var containers []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		started := true
		containers = append(containers, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: &started,
			ContainerID: fmt.Sprintf("containerd://%016x%016x%016x%016x", rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}})
	}
	status := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conditions, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &t, ContainerStatuses: containers, QOSClass: corev1.PodQOSBurstable}
	return json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": status})
}
