package netpol

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"k1m.dev/k1m/pkg/clock"
)

// Namespace holds the rules the servers publish: one ConfigMap per node
// with pods a policy selects, named after the node, under RulesKey. A node
// watches its own by name; nothing else of the cluster.
const Namespace = "k1m-netpol"

// RulesKey is the ConfigMap key of a node's rules (Encode's JSON).
const RulesKey = "rules.json"

// RulesLabel marks the rules ConfigMaps (the namespace also holds what is
// put in every namespace, kube-root-ca.crt).
const RulesLabel = "k1m.dev/netpol-rules"

// Election is the Lease of the server that publishes the rules.
const Election = "k1m-netpol-publisher"

// minInterval spaces the compilations: changes within it are compiled
// together.
const minInterval = time.Second

// Publisher compiles the cluster's NetworkPolicies into each node's rules
// and publishes them. It is the only watcher of every Pod, Namespace and
// NetworkPolicy that enforcement adds (one, on the elected server); a node
// receives an event only when its own rules change.
type Publisher struct {
	Client kubernetes.Interface
}

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	factory := informers.NewSharedInformerFactory(p.Client, 0)
	pods := factory.Core().V1().Pods().Informer()
	// What compilation reads of a pod, and no more: the cache holds every
	// pod of the cluster.
	if err := pods.SetTransform(stripPod); err != nil {
		klog.ErrorS(err, "network policy publisher")
		return
	}
	namespaces := factory.Core().V1().Namespaces().Informer()
	policies := factory.Networking().V1().NetworkPolicies().Informer()
	rulesFactory := informers.NewSharedInformerFactoryWithOptions(p.Client, 0, informers.WithNamespace(Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = RulesLabel }))
	rules := rulesFactory.Core().V1().ConfigMaps()
	changed := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(changed) },
		UpdateFunc: func(any, any) { poke(changed) },
		DeleteFunc: func(any) { poke(changed) },
	}
	for _, inf := range []cache.SharedIndexInformer{pods, namespaces, policies, rules.Informer()} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			klog.ErrorS(err, "network policy publisher")
			return
		}
	}
	factory.Start(ctx.Done())
	rulesFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, namespaces.HasSynced, policies.HasSynced, rules.Informer().HasSynced) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		c := Cluster{}
		for _, o := range pods.GetStore().List() {
			c.Pods = append(c.Pods, o.(*corev1.Pod))
		}
		for _, o := range namespaces.GetStore().List() {
			c.Namespaces = append(c.Namespaces, o.(*corev1.Namespace))
		}
		for _, o := range policies.GetStore().List() {
			c.Policies = append(c.Policies, o.(*networkingv1.NetworkPolicy))
		}
		published, err := rules.Lister().ConfigMaps(Namespace).List(labels.Everything())
		if err == nil {
			err = p.sync(ctx, c, published)
		}
		if err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "publishing network policy rules")
			poke(changed) // again after the interval
		}
		if clock.Sleep(ctx, minInterval) != nil {
			return
		}
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// stripPod keeps what compilation reads.
func stripPod(o any) (any, error) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	var containers []corev1.Container
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			containers = append(containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Labels: pod.Labels, ResourceVersion: pod.ResourceVersion},
		Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName, HostNetwork: pod.Spec.HostNetwork, Containers: containers},
		Status:     corev1.PodStatus{Phase: pod.Status.Phase, PodIPs: pod.Status.PodIPs},
	}, nil
}

// sync writes each node's rules where they changed and deletes those of
// nodes left without any.
func (p *Publisher) sync(ctx context.Context, c Cluster, published []*corev1.ConfigMap) error {
	compiled, err := Compile(c)
	if err != nil {
		return err
	}
	have := map[string]*corev1.ConfigMap{}
	for _, cm := range published {
		have[cm.Name] = cm
	}
	cms := p.Client.CoreV1().ConfigMaps(Namespace)
	for node, rules := range compiled {
		data, err := Encode(rules)
		if err != nil {
			return err
		}
		old := have[node]
		delete(have, node)
		switch {
		case old == nil:
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: Namespace, Labels: map[string]string{RulesLabel: ""}},
				Data: map[string]string{RulesKey: string(data)}}
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("publishing node %s's network policy rules: %w", node, err)
			}
		case old.Data[RulesKey] != string(data):
			cm := old.DeepCopy()
			cm.Data = map[string]string{RulesKey: string(data)}
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("publishing node %s's network policy rules: %w", node, err)
			}
		}
	}
	for node := range have {
		if err := cms.Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting node %s's network policy rules: %w", node, err)
		}
	}
	return nil
}

// DecodeRules reads a node's published rules.
func DecodeRules(cm *corev1.ConfigMap) ([]PodRules, error) {
	rules, err := Decode([]byte(cm.Data[RulesKey]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, RulesKey, err)
	}
	return rules, nil
}
