package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k1m.dev/k1m/pkg/clock"
)

// transientTimeout bounds how long a start phase retries transient
// errors: an etcd election takes seconds, a server restarting its etcd
// some more.
const transientTimeout = 2 * time.Minute

// transient tells an error that may pass by itself from one that will
// not: in a cluster of several servers, a write fails for a moment while
// etcd elects a leader ("etcdserver: leader changed", a 500) or a member
// restarts, which must not stop a starting server.
func transient(err error) bool {
	var netErr net.Error
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		(errors.As(err, &netErr) && netErr.Timeout())
}

// retryTransient runs fn until it succeeds, fails with an error that is
// not transient, or timeout passes; each retry is reported. fn must be
// idempotent.
func retryTransient(ctx context.Context, what string, timeout time.Duration, report func(string), fn func() error) error {
	deadline := time.Now().Add(timeout)
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		err := fn()
		if err == nil || !transient(err) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still failing after %v: %w", what, timeout, err)
		}
		report(fmt.Sprintf("%s: %v; retrying in %v", what, err, delay))
		if err := clock.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}
