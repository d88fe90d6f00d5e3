package clusterload

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// How a simulated node's watch waits before it tries again. The nodes'
// watches stand for the informers of a kubelet, a kube-proxy and a k1m
// agent, which client-go's reflector (tools/cache, v0.32.5) drives:
// reflectorRetry is what it does and what the benchmark does by default;
// eagerRetry, a jittered second before every retry, is what the runs
// recorded before 2026-11-29 did (Config.EagerRetry). The difference
// decides a reconnect storm's shape: while a server is down the
// reflector's waits grow to 30 s, so its nodes come back over up to that
// long, where eager ones come back within a second of each other.
type retryPolicy interface {
	// beforeList waits before a watch lists again: after its list failed
	// (listFailed), or after its version was gone or a watch call failed
	// for good.
	beforeList(ctx context.Context, listFailed bool)
	// watchAgain tells whether a failed watch call is made again from the
	// same version, after waiting; false: list again.
	watchAgain(ctx context.Context, err error) bool
}

// retryPolicy is the policy of f's watches; each watch has its own
// (the reflector's backoff is per reflector).
func (f *counts) retryPolicy() retryPolicy {
	if !f.reflectorRetry {
		return eagerRetry{}
	}
	if f.newBackoff != nil {
		return reflectorRetry{backoff: f.newBackoff()}
	}
	return reflectorRetry{backoff: reflectorBackoff()}
}

// eagerRetry waits a jittered second after a failed call, and lists again
// at once when the version is gone.
type eagerRetry struct{}

func (eagerRetry) beforeList(ctx context.Context, listFailed bool) {
	if listFailed {
		sleepJittered(ctx, time.Second)
	}
}

func (eagerRetry) watchAgain(ctx context.Context, err error) bool {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return false
	}
	sleepJittered(ctx, time.Second)
	return true
}

// reflectorRetry is the reflector's: Run calls ListAndWatch again and
// again and waits the backoff after each (wait.BackoffUntil, sliding),
// whatever ended it; within a ListAndWatch, a watch call refused (no
// server listening, or 429) waits the backoff and watches again from the
// same version, and any other failure ends the ListAndWatch. A watch
// stream that ends cleanly is opened again at once, without a wait.
type reflectorRetry struct{ backoff wait.BackoffManager }

// reflectorBackoff is the reflector's backoff (NewReflectorWithOptions):
// 800 ms, doubled at each wait up to 30 s, each wait up to twice that at
// random (jitter 1.0), and back to 800 ms after 2 minutes without one.
func reflectorBackoff() wait.BackoffManager {
	// Deprecated upstream, and still the one the v0.32.5 reflector uses.
	return wait.NewExponentialBackoffManager(800*time.Millisecond, 30*time.Second, 2*time.Minute, 2.0, 1.0, clock.RealClock{})
}

func (r reflectorRetry) beforeList(ctx context.Context, _ bool) { r.wait(ctx) }

func (r reflectorRetry) watchAgain(ctx context.Context, err error) bool {
	if !utilnet.IsConnectionRefused(err) && !apierrors.IsTooManyRequests(err) {
		return false
	}
	r.wait(ctx)
	return true
}

func (r reflectorRetry) wait(ctx context.Context) {
	t := r.backoff.Backoff()
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}
