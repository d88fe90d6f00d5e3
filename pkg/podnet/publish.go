package podnet

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// RoutesNamespace holds the pod routes the servers publish: one ConfigMap
// per node, named after it, with its pod ranges and the IPv6 address they
// are reached through. A node watches these, not the Nodes: a Node changes
// with every status report (every node's, every 5 minutes, and each
// condition change), its route only when the node joins, leaves or moves.
// Every node watching every Node made each status report an event for
// every node, N²/300 a second; a route changes O(N) times in the
// cluster's life.
const RoutesNamespace = "k1m-pod-routes"

// RouteLabel marks the route ConfigMaps: the namespace also holds what
// others put in every namespace (kube-root-ca.crt), which the publisher
// must leave alone and the nodes need not watch.
const RouteLabel = "k1m.dev/pod-route"

// routeSelector lists the route ConfigMaps only.
func routeSelector(o *metav1.ListOptions) { o.LabelSelector = RouteLabel }

// RouteSelector lists the route ConfigMaps only (for other watchers of
// RoutesNamespace).
func RouteSelector(o *metav1.ListOptions) { routeSelector(o) }

// BoundAddress reads a route ConfigMap: the address its node is routed
// through and the UID of the Node that address is bound to (the publisher
// bound it at the node's join); ok is false for a ConfigMap that binds no
// address (written by a release that did not bind).
func BoundAddress(cm *corev1.ConfigMap) (addr netip.Addr, node types.UID, ok bool) {
	addr, err := netip.ParseAddr(cm.Data[routeVia])
	if err != nil || cm.Data[routeNodeUID] == "" {
		return netip.Addr{}, "", false
	}
	return addr.Unmap(), types.UID(cm.Data[routeNodeUID]), true
}

// Keys of a route ConfigMap.
const (
	routePodCIDRs = "podCIDRs" // comma separated
	routeVia      = "via"
	// routeNodeUID binds the route to one Node: its next hop stays the
	// address first published for that Node until the Node is deleted.
	routeNodeUID = "nodeUID"
)

// publishResync is how often every node's route is checked again, so that
// a route ConfigMap deleted or changed by hand is put right.
const publishResync = 10 * time.Minute

// Index names of the publisher's caches.
const (
	byPodCIDR    = "podCIDR"
	byInternalIP = "internalIP"
	byVia        = "via"
)

// PublishRoutes keeps RoutesNamespace in line with the Nodes until ctx
// ends, publishing only what rules allow: one server does it (the caller
// elects it). It holds the Nodes stripped to what a route needs, indexed
// by pod range and address, and the route ConfigMaps indexed by range and
// next hop, so that a check reads caches only: no request per join but the
// route's own write (and the servers' addresses, at most every
// serversEvery).
//
// Its writes are paced to eventsPerSecond route events a second summed
// over the nodes (routeWriteRate).
func PublishRoutes(ctx context.Context, client kubernetes.Interface, rules RouteRules, eventsPerSecond int) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	nodesFactory := informers.NewSharedInformerFactory(client, publishResync)
	nodes := nodesFactory.Core().V1().Nodes()
	_ = nodes.Informer().SetTransform(stripNode)
	_ = nodes.Informer().AddIndexers(cache.Indexers{byPodCIDR: nodePodCIDRs, byInternalIP: nodeInternalIP})
	routesFactory := informers.NewSharedInformerFactoryWithOptions(client, publishResync, informers.WithNamespace(RoutesNamespace), informers.WithTweakListOptions(routeSelector))
	routes := routesFactory.Core().V1().ConfigMaps()
	_ = routes.Informer().AddIndexers(cache.Indexers{byPodCIDR: routeCIDRs, byVia: routeNextHop})
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			_, name, _ := cache.SplitMetaNamespaceKey(key)
			queue.Add(name)
		}
	}
	handlers := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
	_, _ = nodes.Informer().AddEventHandler(handlers)
	pacing := newWritePacing(eventsPerSecond)
	_, _ = nodes.Informer().AddEventHandler(pacing.handlers())
	_, _ = routes.Informer().AddEventHandler(handlers)
	nodesFactory.Start(ctx.Done())
	routesFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced, routes.Informer().HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	p := &publisher{client: client, rules: rules, servers: &cachedServers{lookup: rules.Servers, now: time.Now},
		pacing: pacing,
		nodes:  nodes.Informer().GetIndexer(), routes: routes.Informer().GetIndexer(),
		events:  broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "k1m-pod-routes"}),
		recheck: func(name string) { queue.AddAfter(name, refusedRecheck) },
	}
	var workers sync.WaitGroup
	for range routeWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			p.work(ctx, queue)
		}()
	}
	workers.Wait()
}

// routeWorkers sync nodes side by side. A route write waits for its
// store's commit, hundreds of milliseconds on a server busy with a join
// burst: one write at a time held the publisher to 1-5 routes a second
// whatever its pacing allowed (docs/performance/2026-12-02-route-events).
// The queue gives a node to one worker at a time, the pacing is shared,
// and each decision reads the caches as a lone worker's did: a write in
// flight is no more unseen than one the informer has not delivered yet.
const routeWorkers = 8

// work syncs the nodes the queue gives it until the queue shuts down.
func (p *publisher) work(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) {
	for {
		name, quit := queue.Get()
		if quit {
			return
		}
		if err := p.sync(ctx, name); err != nil && ctx.Err() == nil {
			klog.V(2).InfoS("pod route not published yet", "node", name, "err", err)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

// stripNode keeps of a Node what a route needs: the publisher holds every
// Node of the cluster.
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion, UID: n.UID, CreationTimestamp: n.CreationTimestamp},
		Spec:       corev1.NodeSpec{PodCIDRs: n.Spec.PodCIDRs},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

func nodePodCIDRs(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, c := range n.Spec.PodCIDRs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p.Masked().String())
		}
	}
	return out, nil
}

func nodeInternalIP(obj any) ([]string, error) {
	if n, ok := obj.(*corev1.Node); ok {
		if addr, ok := internalAddr(n); ok {
			return []string{addr.String()}, nil
		}
	}
	return nil, nil
}

func routeCIDRs(obj any) ([]string, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, c := range strings.Split(cm.Data[routePodCIDRs], ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out = append(out, p.Masked().String())
		}
	}
	return out, nil
}

func routeNextHop(obj any) ([]string, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		if addr, err := netip.ParseAddr(cm.Data[routeVia]); err == nil {
			return []string{addr.Unmap().String()}, nil
		}
	}
	return nil, nil
}

type publisher struct {
	client kubernetes.Interface
	// pacing spaces the route writes (routeWriteRate).
	pacing  *writePacing
	rules   RouteRules
	servers *cachedServers
	nodes   cache.Indexer // stripped Nodes
	routes  cache.Indexer // route ConfigMaps
	events  record.EventRecorder
	// refused is the last refusal raised for each node, so that a resync
	// or a heartbeat does not raise it again: one Event per refusal. The
	// workers share it.
	refusedMu sync.Mutex
	refused   map[string]string
	// recheck looks at a refused node again later: what it was refused
	// for may change without an event of the Node (a server published
	// since the servers' addresses were last looked up).
	recheck func(name string)
}

// refusedRecheck is when a refused node is looked at again: after the
// servers' addresses may have been looked up anew. A check reads caches
// only: a refused node costs no request.
const refusedRecheck = 2 * serversEvery

func (p *publisher) node(name string) (*corev1.Node, bool) {
	obj, ok, err := p.nodes.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := obj.(*corev1.Node)
	return n, ok
}

func (p *publisher) route(name string) (*corev1.ConfigMap, bool) {
	obj, ok, err := p.routes.GetByKey(RoutesNamespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	cm, ok := obj.(*corev1.ConfigMap)
	return cm, ok
}

// sync makes node name's route ConfigMap what its Node may have: created,
// updated, or deleted with the Node or when what it holds is refused;
// nothing written when it already is.
func (p *publisher) sync(ctx context.Context, name string) error {
	have, _ := p.route(name)
	var want map[string]string
	if n, ok := p.node(name); ok {
		var why *refusal
		var err error
		want, why, err = p.routeFor(ctx, n, have)
		if err != nil {
			return err
		}
		p.report(n, why)
	} else {
		p.forgetRefusal(name)
	}
	return p.write(ctx, name, have, want)
}

// routeFor is the route n may have (nil: none), and what of n is
// refused. have is n's published route, whose next hop n keeps.
func (p *publisher) routeFor(ctx context.Context, n *corev1.Node, have *corev1.ConfigMap) (map[string]string, *refusal, error) {
	servers, err := p.servers.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	podRange, why := p.rules.podRange(n, servers, p)
	if why != nil || !podRange.IsValid() {
		return nil, why, nil
	}
	addr, ok := internalAddr(n)
	if bound, isBound := boundVia(n, have); isBound {
		if ok && addr != bound {
			why = &refusal{fieldInternalIP, fmt.Sprintf("%s differs from %s, the address node %s was first routed through: its route stays via %s (delete the Node of a node that really moved; it registers again)", addr, bound, n.Name, bound)}
		}
		return routeData(n, podRange, bound), why, nil
	}
	if !ok {
		return nil, nil, nil // no IPv6 address reported yet
	}
	if why := p.rules.nextHop(n, addr, servers, p); why != nil {
		return nil, why, nil
	}
	return routeData(n, podRange, addr), nil, nil
}

// boundVia is the next hop have binds n to: the one published for this
// very Node (its UID), whose later status does not move it.
func boundVia(n *corev1.Node, have *corev1.ConfigMap) (netip.Addr, bool) {
	if have == nil || have.Data[routeNodeUID] == "" || have.Data[routeNodeUID] != string(n.UID) {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(have.Data[routeVia])
	return addr.Unmap(), err == nil
}

func routeData(n *corev1.Node, podRange netip.Prefix, via netip.Addr) map[string]string {
	return map[string]string{routePodCIDRs: podRange.String(), routeVia: via.String(), routeNodeUID: string(n.UID)}
}

// rangeOwner names another node whose published route holds prefix, or
// whose Node claims it and was created before n.
func (p *publisher) rangeOwner(n *corev1.Node, prefix string) string {
	return p.owner(n, byPodCIDR, byPodCIDR, prefix)
}

// viaOwner names another node routed through addr, or whose Node claims
// it and was created before n.
func (p *publisher) viaOwner(n *corev1.Node, addr string) string {
	return p.owner(n, byVia, byInternalIP, addr)
}

func (p *publisher) owner(n *corev1.Node, routeIndex, nodeIndex, key string) string {
	cms, _ := p.routes.ByIndex(routeIndex, key)
	for _, obj := range cms {
		cm := obj.(*corev1.ConfigMap)
		if other, ok := p.node(cm.Name); ok && cm.Name != n.Name && cm.Data[routeNodeUID] == string(other.UID) {
			return cm.Name
		}
	}
	others, _ := p.nodes.ByIndex(nodeIndex, key)
	for _, obj := range others {
		if other := obj.(*corev1.Node); other.Name != n.Name && CreatedBefore(other, n) {
			return other.Name
		}
	}
	return ""
}

// CreatedBefore tells whether Node a was created before b, ties broken by
// name: where two nodes claim one address or range and neither has it
// bound, the first keeps it (the route publisher and the approver both
// decide so).
func CreatedBefore(a, b *corev1.Node) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// report logs a refusal and raises it as an Event on the Node, once for
// each new refusal; an accepted node is forgotten.
func (p *publisher) report(n *corev1.Node, why *refusal) {
	if why == nil {
		p.forgetRefusal(n.Name)
		return
	}
	if p.recheck != nil {
		p.recheck(n.Name)
	}
	if !p.newRefusal(n.Name, why.String()) {
		return
	}
	klog.InfoS("pod route refused", "node", n.Name, "field", why.field, "why", why.why)
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID}
	p.events.Eventf(ref, corev1.EventTypeWarning, ReasonRouteRefused, "%s of node %s is not routed: %s", why.field, n.Name, why.why)
}

// newRefusal records why node name is refused, and tells whether that
// differs from the last refusal raised for it.
func (p *publisher) newRefusal(name, why string) bool {
	p.refusedMu.Lock()
	defer p.refusedMu.Unlock()
	if p.refused[name] == why {
		return false
	}
	if p.refused == nil {
		p.refused = map[string]string{}
	}
	p.refused[name] = why
	return true
}

func (p *publisher) forgetRefusal(name string) {
	p.refusedMu.Lock()
	defer p.refusedMu.Unlock()
	delete(p.refused, name)
}

// ReasonRouteRefused is the reason of the Event a refused route raises.
const ReasonRouteRefused = "K1mPodRouteRefused"

// write makes the ConfigMap hold want (nil: no ConfigMap).
func (p *publisher) write(ctx context.Context, name string, have *corev1.ConfigMap, want map[string]string) error {
	cms := p.client.CoreV1().ConfigMaps(RoutesNamespace)
	if want == nil && have == nil || have != nil && want != nil && maps.Equal(have.Data, want) {
		return nil
	}
	if err := p.pacing.wait(ctx); err != nil {
		return err
	}
	var err error
	switch {
	case want == nil:
		err = cms.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
	case have == nil:
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: RoutesNamespace, Labels: map[string]string{RouteLabel: "true"}}, Data: want}, metav1.CreateOptions{})
	case !maps.Equal(have.Data, want):
		have = have.DeepCopy()
		have.Data = want
		_, err = cms.Update(ctx, have, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("publishing the pod route of node %s: %w", name, err)
	}
	return nil
}

// routeOf reads a route ConfigMap: the node's routes to its pods.
func routeOf(cm *corev1.ConfigMap) []podRoute {
	via := parseIPv6(cm.Data[routeVia])
	if via == nil {
		return nil
	}
	var routes []podRoute
	for _, cidr := range strings.Split(cm.Data[routePodCIDRs], ",") {
		if dst := parseIPv6CIDR(strings.TrimSpace(cidr)); dst != nil {
			routes = append(routes, podRoute{dst: dst, via: via})
		}
	}
	slices.SortFunc(routes, func(a, b podRoute) int { return strings.Compare(a.dst.String(), b.dst.String()) })
	return routes
}

// Each route written is an event to every node's watch of the routes: N
// events per join, N² to register N nodes. The publisher writes at most
// budget/N routes a second (--pod-route-events-per-second), so that the
// events its writes send stay near the budget summed over the nodes, and
// never fewer than minRouteWrites (above budget/5 nodes its events grow
// with N, as they did at its one fixed rate before) nor more than
// maxRouteWrites (the rate joins reach: RoutesWriteRate).
const (
	minRouteWrites = 5
	maxRouteWrites = 200
)

// RoutesWriteRate is the most routes the publisher writes a second: its
// client's rate, so that only the pacing limits it.
const RoutesWriteRate = maxRouteWrites

// routeWriteRate is how many routes a second the publisher writes with
// nodes Nodes in the cluster and a budget of route events a second.
func routeWriteRate(nodes, budget int) rate.Limit {
	r := float64(budget) / float64(max(nodes, 1))
	return rate.Limit(min(max(r, minRouteWrites), maxRouteWrites))
}

// writePacing holds the route writes to routeWriteRate of the Node count,
// which the Node informer's events keep (a burst of joins slows the
// writes as it grows).
type writePacing struct {
	budget  int
	nodes   atomic.Int64
	limiter *rate.Limiter
}

func newWritePacing(budget int) *writePacing {
	return &writePacing{budget: budget, limiter: rate.NewLimiter(maxRouteWrites, 1)}
}

// handlers count the Nodes.
func (w *writePacing) handlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.nodes.Add(1) },
		DeleteFunc: func(any) { w.nodes.Add(-1) },
	}
}

// wait returns when the next write may go (an error: ctx ended).
func (w *writePacing) wait(ctx context.Context) error {
	limit := routeWriteRate(int(w.nodes.Load()), w.budget)
	if limit != w.limiter.Limit() {
		w.limiter.SetLimit(limit)
		// One second's writes at most at once.
		w.limiter.SetBurst(max(1, int(limit)))
	}
	return w.limiter.Wait(ctx)
}
