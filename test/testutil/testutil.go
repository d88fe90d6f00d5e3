// Package testutil holds what the cluster tests (test/integration,
// test/kind) share.
package testutil

import (
	"testing"
	"time"
)

// Eventually polls f every 2 s until it returns nil, and fails the test
// with f's last error once timeout has passed.
func Eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(2 * time.Second)
	}
}
