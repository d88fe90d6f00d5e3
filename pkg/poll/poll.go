// Package poll is k1m's one way to wait for a condition: Until calls a
// check at an interval until it passes, fails for good, the context ends
// or a deadline passes, and says what it waited for and its last error.
// APIServerReady is the one readiness check of a kube-apiserver; product
// code, the test helpers (pkg/testutil) and the tooling all wait with
// these.
package poll

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// Stop wraps an error a check returns to end the wait at once with it
// (a process that exited, a refusal that will not change). A nil error
// (a process that ended without one) still ends the wait as a failure.
func Stop(err error) error {
	if err == nil {
		err = errors.New("stopped without an error before the condition held")
	}
	return &stopError{err}
}

type stopError struct{ err error }

func (s *stopError) Error() string { return s.err.Error() }
func (s *stopError) Unwrap() error { return s.err }

// ErrTimeout is wrapped by the error Until returns when timeout passes.
var ErrTimeout = errors.New("timed out")

// Until calls check every interval (first at once) until it returns nil.
// It returns the error wrapped by Stop, ctx's error, or, once timeout has
// passed, an error naming what, the timeout and check's last error.
func Until(ctx context.Context, interval, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var stop *stopError
		if errors.As(err, &stop) {
			return stop.err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s: %w after %s: %v", what, ErrTimeout, timeout, err)
		}
		t := time.NewTimer(min(interval, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// APIServerReady asks kube-apiserver's /readyz once: nil when it answers
// 200, else an error with the status (or why there was none).
func APIServerReady(ctx context.Context, client rest.Interface) error {
	status := 0
	res := client.Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
	if status == http.StatusOK {
		return nil
	}
	if err := res.Error(); err != nil && status == 0 {
		return fmt.Errorf("/readyz: %w", err)
	}
	return fmt.Errorf("/readyz status %d", status)
}
