package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRetryTransientRetriesOnlyWhatPasses(t *testing.T) {
	leaderChanged := fmt.Errorf("applying RoleBinding kube-system/k1m:server-bootstrap-reader: %w", apierrors.NewInternalError(errors.New("etcdserver: leader changed")))
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil)
	ctx := context.Background()
	var reports []string
	report := func(msg string) { reports = append(reports, msg) }

	calls := 0
	err := retryTransient(ctx, "publishing", time.Minute, report, func() error {
		if calls++; calls == 1 {
			return leaderChanged
		}
		return nil
	})
	want := []string{"publishing: applying RoleBinding kube-system/k1m:server-bootstrap-reader: Internal error occurred: etcdserver: leader changed; retrying in 1s"}
	if err != nil || calls != 2 || len(reports) != 1 || reports[0] != want[0] {
		t.Errorf("a leader change: %v after %d calls, reports %q; want success after 2 and %q", err, calls, reports, want)
	}

	calls = 0
	err = retryTransient(ctx, "publishing", time.Minute, report, func() error { calls++; return invalid })
	if !errors.Is(err, invalid) || calls != 1 {
		t.Errorf("an invalid object: %v after %d calls, want it at once", err, calls)
	}

	calls = 0
	err = retryTransient(ctx, "publishing", 0, report, func() error { calls++; return leaderChanged })
	if err == nil || err.Error() != "publishing: still failing after 0s: "+leaderChanged.Error() || calls != 1 {
		t.Errorf("past the timeout: %v after %d calls", err, calls)
	}
}
