// Package dnsscale keeps CoreDNS's replicas in step with the cluster's
// size: one replica per NodesPerReplica nodes, never fewer than
// MinReplicas. One server does it (the holder of the Lease
// kube-system/k1m-dns-scaler on a server of several), reading the node
// count once a minute from one request that returns a single Node and
// the number left (a list with limit 1, which etcd answers by counting
// its keys): one request a minute whatever the cluster's size, and no
// Node list held anywhere.
package dnsscale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"k1m.dev/k1m/pkg/clock"
)

const (
	// Namespace and Deployment are CoreDNS's (manifests/coredns.yaml).
	Namespace  = "kube-system"
	Deployment = "coredns"
	// Election is the Lease of the server that scales CoreDNS.
	Election = "k1m-dns-scaler"
	// MinReplicas keeps DNS answering while one replica's node is down
	// or drained, as kubeadm's two replicas do.
	MinReplicas = 2
	// Interval is how often the node count is read (±20%).
	Interval = time.Minute
)

// Replicas is CoreDNS's replica count for nodes nodes at one replica per
// perReplica nodes (perReplica > 0).
func Replicas(nodes, perReplica int) int32 {
	return int32(max(MinReplicas, (nodes+perReplica-1)/perReplica))
}

// CountNodes is the number of Nodes, from a list with limit 1: one Node
// and the count of those left (remainingItemCount), not the list.
func CountNodes(ctx context.Context, client kubernetes.Interface) (int, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("counting nodes: %w", err)
	}
	n := len(list.Items)
	if list.RemainingItemCount != nil {
		n += int(*list.RemainingItemCount)
	} else if list.Continue != "" {
		// More Nodes, and no count of them: never guess 1.
		return 0, fmt.Errorf("counting nodes: a list with limit 1 said there are more but not how many (no remainingItemCount)")
	}
	return n, nil
}

// Initial is the replica count the CoreDNS manifest is applied with, so
// that applying it at a server's start agrees with the scaler: with
// perReplica 0 (scaling off) the Deployment's present count, MinReplicas
// for a new one.
func Initial(ctx context.Context, client kubernetes.Interface, perReplica int) (int32, error) {
	if perReplica > 0 {
		nodes, err := CountNodes(ctx, client)
		if err != nil {
			return 0, err
		}
		return Replicas(nodes, perReplica), nil
	}
	d, err := client.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return MinReplicas, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading %s/%s: %w", Namespace, Deployment, err)
	}
	if d.Spec.Replicas == nil {
		return MinReplicas, nil
	}
	return *d.Spec.Replicas, nil
}

// Scaler sets CoreDNS's replicas from the node count.
type Scaler struct {
	Client     kubernetes.Interface
	PerReplica int // nodes per replica, above 0
}

// Run scales CoreDNS now and then every Interval ±20% until ctx ends.
func (s *Scaler) Run(ctx context.Context) {
	for {
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "scaling CoreDNS")
		}
		jitter := time.Duration(float64(Interval) * (0.8 + 0.4*rand.Float64()))
		if clock.Sleep(ctx, jitter) != nil {
			return
		}
	}
}

// Sync sets CoreDNS's replicas for the present node count, through the
// Deployment's scale subresource, when they differ.
func (s *Scaler) Sync(ctx context.Context) error {
	nodes, err := CountNodes(ctx, s.Client)
	if err != nil {
		return err
	}
	want := Replicas(nodes, s.PerReplica)
	deployments := s.Client.AppsV1().Deployments(Namespace)
	scale, err := deployments.GetScale(ctx, Deployment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Deleted by hand: nothing to scale until a server's start
		// applies it again.
		klog.V(2).InfoS("no CoreDNS Deployment to scale", "deployment", Namespace+"/"+Deployment)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s/%s's scale: %w", Namespace, Deployment, err)
	}
	if scale.Spec.Replicas == want {
		return nil
	}
	klog.InfoS("scaling CoreDNS", "nodes", nodes, "nodesPerReplica", s.PerReplica, "from", scale.Spec.Replicas, "to", want)
	next := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: Deployment, Namespace: Namespace, ResourceVersion: scale.ResourceVersion},
		Spec: autoscalingv1.ScaleSpec{Replicas: want}}
	if _, err := deployments.UpdateScale(ctx, Deployment, next, metav1.UpdateOptions{FieldManager: "k1m-dns-scaler"}); err != nil {
		return fmt.Errorf("scaling %s/%s to %d: %w", Namespace, Deployment, want, err)
	}
	return nil
}
