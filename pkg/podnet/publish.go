package podnet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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

// Keys of a route ConfigMap.
const (
	routePodCIDRs = "podCIDRs" // comma separated
	routeVia      = "via"
)

// routeData is what a node's route ConfigMap holds; nil when the node has
// no pod range or IPv6 InternalIP yet.
func routeData(n *corev1.Node) map[string]string {
	ip := internalIPv6(n)
	if ip == nil || len(n.Spec.PodCIDRs) == 0 {
		return nil
	}
	return map[string]string{routePodCIDRs: strings.Join(n.Spec.PodCIDRs, ","), routeVia: ip.String()}
}

// publishResync is how often every node's route is checked again, so that
// a route ConfigMap deleted or changed by hand is put right.
const publishResync = 10 * time.Minute

// PublishRoutes keeps RoutesNamespace in line with the Nodes until ctx
// ends: one server does it (the caller elects it). It holds the Nodes
// stripped to what a route needs.
func PublishRoutes(ctx context.Context, client kubernetes.Interface) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	nodesFactory := informers.NewSharedInformerFactory(client, publishResync)
	nodes := nodesFactory.Core().V1().Nodes()
	_ = nodes.Informer().SetTransform(stripNode)
	routesFactory := informers.NewSharedInformerFactoryWithOptions(client, publishResync, informers.WithNamespace(RoutesNamespace), informers.WithTweakListOptions(routeSelector))
	routes := routesFactory.Core().V1().ConfigMaps()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			_, name, _ := cache.SplitMetaNamespaceKey(key)
			queue.Add(name)
		}
	}
	handlers := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
	_, _ = nodes.Informer().AddEventHandler(handlers)
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
	p := publisher{client: client, nodes: nodes.Lister().Get, routes: func(name string) (*corev1.ConfigMap, error) {
		return routes.Lister().ConfigMaps(RoutesNamespace).Get(name)
	}}
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
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion, UID: n.UID},
		Spec:       corev1.NodeSpec{PodCIDRs: n.Spec.PodCIDRs},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

type publisher struct {
	client kubernetes.Interface
	nodes  func(name string) (*corev1.Node, error)
	routes func(name string) (*corev1.ConfigMap, error)
}

// sync makes node name's route ConfigMap what its Node says: created,
// updated, or deleted with the Node; nothing written when it already is.
func (p publisher) sync(ctx context.Context, name string) error {
	cms := p.client.CoreV1().ConfigMaps(RoutesNamespace)
	var want map[string]string
	n, err := p.nodes(name)
	switch {
	case err == nil:
		want = routeData(n)
	case !apierrors.IsNotFound(err):
		return err
	}
	have, err := p.routes(name)
	switch {
	case apierrors.IsNotFound(err):
		have = nil
	case err != nil:
		return err
	}
	switch {
	case want == nil && have == nil:
		return nil
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
