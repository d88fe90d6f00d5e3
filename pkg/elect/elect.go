// Package elect runs k1m's own controllers (the CSR approver, the pod
// route publisher) on one server at a time: while the server holds a Lease
// in kube-system, with kube-controller-manager's timings, campaigning
// again after losing it.
package elect

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Run runs lead while identity holds the Lease kube-system/lease, until ctx
// ends; a lost Lease cancels lead's context and the server campaigns again.
func Run(ctx context.Context, client kubernetes.Interface, lease, identity string, lead func(context.Context)) {
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: lease},
		Client: client.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: identity}}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true, Name: lease,
			// kube-controller-manager's timings.
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					klog.InfoS("leading", "lease", metav1.NamespaceSystem+"/"+lease)
					lead(ctx)
				},
				OnStoppedLeading: func() { klog.InfoS("no longer leading", "lease", metav1.NamespaceSystem+"/"+lease) },
			},
		})
	}
}
