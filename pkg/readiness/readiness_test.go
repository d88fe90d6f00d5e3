package readiness

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time.
type clock struct{ now atomic.Pointer[time.Time] }

func newClock() *clock {
	c := &clock{}
	c.set(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC))
	return c
}
func (c *clock) set(t time.Time)                  { c.now.Store(&t) }
func (c *clock) get() time.Time                   { return *c.now.Load() }
func (c *clock) add(d time.Duration)              { c.set(c.get().Add(d)) }
func fixed(err error) func(context.Context) error { return func(context.Context) error { return err } }

// answer is what the handler says now.
type answer struct {
	Status int
	Body   string
}

func get(t *testing.T, h http.Handler, method, path string) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return answer{rec.Code, string(body)}
}

func TestVerdicts(t *testing.T) {
	clk := newClock()
	var noFsync atomic.Pointer[error]
	noErr := error(nil)
	noFsync.Store(&noErr)
	c := New(Config{
		Probes: []Probe{
			{"kube-apiserver", fixed(nil)},
			{"no-fsync etcd", func(context.Context) error { return *noFsync.Load() }},
		},
		Extra:    []Probe{{"extra", fixed(nil)}},
		Interval: 2 * time.Second, Now: clk.get,
	})
	h := c.Handler()
	if got, want := get(t, h, "GET", Path), (answer{503, "not ready: not checked yet"}); got != want {
		t.Errorf("before the first round: %+v, want %+v", got, want)
	}
	if r := c.CheckOnce(context.Background()); !reflect.DeepEqual(r, Result{At: clk.get()}) {
		t.Errorf("round: %+v, want ok", r)
	}
	if got, want := get(t, h, "GET", Path), (answer{200, "ok"}); got != want {
		t.Errorf("after a good round: %+v, want %+v", got, want)
	}
	// Recent enough up to 3 intervals; older is no verdict.
	clk.add(6 * time.Second)
	if got, want := get(t, h, "GET", Path), (answer{200, "ok"}); got != want {
		t.Errorf("3 intervals later: %+v, want %+v", got, want)
	}
	clk.add(time.Second)
	if got, want := get(t, h, "GET", Path), (answer{503, "not ready: last checked 7s ago (at 2026-11-25T04:00:00Z): the check is stuck"}); got != want {
		t.Errorf("stale: %+v, want %+v", got, want)
	}
	lost := errors.New("writing /k1m/probe/s1: context deadline exceeded")
	noFsync.Store(&lost)
	want := Result{Failed: "no-fsync etcd", Reason: lost.Error(), At: clk.get()}
	if r := c.CheckOnce(context.Background()); !reflect.DeepEqual(r, want) {
		t.Errorf("round: %+v, want %+v", r, want)
	}
	if got, want := get(t, h, "GET", Path), (answer{503, "not ready: no-fsync etcd: writing /k1m/probe/s1: context deadline exceeded (at 2026-11-25T04:00:07Z)"}); got != want {
		t.Errorf("store lost: %+v, want %+v", got, want)
	}
	// Other paths and methods are not this endpoint.
	if got := get(t, h, "GET", "/readyz"); got.Status != 404 {
		t.Errorf("GET /readyz: %+v, want 404", got)
	}
	if got := get(t, h, "POST", Path); got.Status != 405 {
		t.Errorf("POST %s: %+v, want 405", Path, got)
	}
}

// The first failing probe in order is the reason; Extra ones come last.
func TestFirstFailureInOrderAndExtraProbes(t *testing.T) {
	clk := newClock()
	c := New(Config{
		Probes: []Probe{{"a", fixed(nil)}, {"b", fixed(errors.New("b down"))}, {"c", fixed(errors.New("c down"))}},
		Extra:  []Probe{{"generation", fixed(errors.New("old generation"))}},
		Now:    clk.get,
	})
	if r, want := c.CheckOnce(context.Background()), (Result{Failed: "b", Reason: "b down", At: clk.get()}); !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v, want %+v", r, want)
	}
	c = New(Config{Probes: []Probe{{"a", fixed(nil)}}, Extra: []Probe{{"generation", fixed(errors.New("old generation"))}}, Now: clk.get})
	if r, want := c.CheckOnce(context.Background()), (Result{Failed: "generation", Reason: "old generation", At: clk.get()}); !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v, want %+v", r, want)
	}
}

// A probe that hangs fails at Timeout, and the round still ends.
func TestHangingProbeTimesOut(t *testing.T) {
	c := New(Config{Probes: []Probe{{"store", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}}, Timeout: 50 * time.Millisecond})
	start := time.Now()
	r := c.CheckOnce(context.Background())
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("round took %s", took)
	}
	if r.Failed != "store" || r.Reason != context.DeadlineExceeded.Error() {
		t.Errorf("got %+v, want store failed with %v", r, context.DeadlineExceeded)
	}
}

func TestJitterBounds(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want time.Duration
	}{{0, 1600 * time.Millisecond}, {0.5, 2 * time.Second}, {0.999999, 2400 * time.Millisecond}} {
		got := Jittered(2*time.Second, c.r)
		if d := got - c.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("Jittered(2s, %v) = %s, want %s", c.r, got, c.want)
		}
	}
}

// Run keeps the result fresh until its context ends.
func TestRunKeepsTheVerdictFresh(t *testing.T) {
	var rounds atomic.Int32
	c := New(Config{Probes: []Probe{{"p", func(context.Context) error { rounds.Add(1); return nil }}}, Interval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for rounds.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Ready(); err != nil || rounds.Load() < 5 {
		t.Errorf("after %d rounds: %v", rounds.Load(), err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
