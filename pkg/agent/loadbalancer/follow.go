package loadbalancer

import (
	"context"
	"net"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The Service whose endpoints are the API servers: every kube-apiserver
// publishes its advertise address there (and removes it when it stops),
// in an EndpointSlice too.
const (
	apiServiceNamespace = metav1.NamespaceDefault
	apiServiceName      = "kubernetes"
	apiPortName         = "https"
)

// Follow merges the kubernetes Service's EndpointSlices into the server
// list until ctx ends (Update: the list keeps every server seen). client should reach the cluster
// through the balancer itself, so that it follows the servers too. A node
// may read EndpointSlices: system:node-proxier, which k1m grants
// system:nodes for kube-proxy (manifests/rbac-nodes.yaml).
func (lb *LoadBalancer) Follow(ctx context.Context, client kubernetes.Interface) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(apiServiceNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + apiServiceName
		}))
	slices := factory.Discovery().V1().EndpointSlices()
	lister := slices.Lister()
	sync := func() {
		all, err := lister.List(labels.Everything())
		if err == nil {
			lb.Update(Addresses(all))
		}
	}
	slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { sync() },
		UpdateFunc: func(any, any) { sync() },
		DeleteFunc: func(any) { sync() },
	})
	factory.Start(ctx.Done())
}

// Addresses are the host:port of every ready endpoint of the kubernetes
// Service's slices, on its https port (the only port, if unnamed).
// Endpoints without a ready condition count as ready, as the API says.
func Addresses(slices []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		if s.Namespace != apiServiceNamespace || s.Labels[discoveryv1.LabelServiceName] != apiServiceName {
			continue
		}
		port := slicePort(s)
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	return normalize(out)
}

func slicePort(s *discoveryv1.EndpointSlice) int32 {
	for _, p := range s.Ports {
		if p.Port != nil && (p.Name != nil && *p.Name == apiPortName || len(s.Ports) == 1) {
			return *p.Port
		}
	}
	return 0
}
