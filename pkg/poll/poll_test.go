package poll

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestUntilReturnsOnceTheCheckPasses(t *testing.T) {
	calls := 0
	err := Until(context.Background(), time.Millisecond, time.Minute, "three calls", func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilNamesWhatTimedOutWithTheLastError(t *testing.T) {
	err := Until(context.Background(), time.Millisecond, 20*time.Millisecond, "the thing", func(context.Context) error {
		return errors.New("still broken")
	})
	if !errors.Is(err, ErrTimeout) || err.Error() != "the thing: timed out after 20ms: still broken" {
		t.Fatalf("err %q", err)
	}
}

func TestUntilStopsAtAStopError(t *testing.T) {
	exited := errors.New("the process exited")
	calls := 0
	err := Until(context.Background(), time.Millisecond, time.Minute, "x", func(context.Context) error {
		calls++
		return Stop(exited)
	})
	if err != exited || calls != 1 {
		t.Fatalf("err %v after %d calls, want the stop error after 1", err, calls)
	}
}

func TestUntilEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Until(ctx, time.Hour, time.Hour, "x", func(context.Context) error { return errors.New("no") })
	if !errors.Is(err, context.Canceled) || err.Error() != "x: context canceled (last: no)" {
		t.Fatalf("err %q", err)
	}
}

func TestAPIServerReady(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			t.Errorf("asked %s", r.URL.Path)
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL}).Discovery().RESTClient()
	if err := APIServerReady(context.Background(), client); err == nil || err.Error() != "/readyz status 503" {
		t.Fatalf("not ready: %v", err)
	}
	status = http.StatusOK
	if err := APIServerReady(context.Background(), client); err != nil {
		t.Fatalf("ready: %v", err)
	}
	srv.Close()
	if err := APIServerReady(context.Background(), client); err == nil {
		t.Fatal("no server: nil")
	}
}

func TestStopWithoutAnErrorStillFails(t *testing.T) {
	err := Until(context.Background(), time.Millisecond, time.Minute, "x", func(context.Context) error { return Stop(nil) })
	if err == nil || err.Error() != "stopped without an error before the condition held" {
		t.Fatalf("err %v", err)
	}
}
