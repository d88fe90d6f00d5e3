// Package readiness is a k1m server's own readiness, which agents check
// before they send a node's connections to it (pkg/agent/loadbalancer).
// kube-apiserver's /readyz is not enough: it ignores the stores of
// --etcd-servers-overrides, so a server whose no-fsync etcd (Leases,
// Events) lost its quorum answers 200 while no node can renew its Lease
// through it.
//
// A Checker runs named probes every Interval (jittered) and keeps the
// last result; its Handler serves GET /k1m/readyz from that result: 200
// "ok" when every probe passed within the last StaleAfter, else 503 with
// the failing probe and why. A request never runs a probe, so however
// many agents ask, the stores see one write per probe per interval per
// server: O(servers), not O(nodes).
//
// The files, by concern:
//
//	readiness.go  the Checker: the probe loop, the cached result, the handler
//	probes.go     the probes a server runs: kube-apiserver's /readyz, a write to a store
//	serve.go      the HTTPS listener: the server's certificate, client certificates required
package readiness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Path is where the Handler answers.
const Path = "/k1m/readyz"

// Defaults of Config's timings.
const (
	// DefaultInterval is how often the probes run: an agent checks every
	// 5 s, so a server's verdict is at most ~2 s older than the check.
	DefaultInterval = 2 * time.Second
	// DefaultTimeout bounds each probe: a store with a quorum commits a
	// small write in milliseconds; one without never does.
	DefaultTimeout = 1500 * time.Millisecond
	// staleIntervals: a result older than this many intervals is no
	// verdict (the loop is stuck, or stopped): not ready.
	staleIntervals = 3
	// jitter spreads each wait over Interval times 1 ± jitter, so that
	// servers started together do not probe the shared stores in step.
	jitter = 0.2
)

// Probe is one condition of readiness: Check returns nil when it holds.
type Probe struct {
	Name  string
	Check func(ctx context.Context) error
}

// Config sets up a Checker.
type Config struct {
	// Probes run at every round, at the same time; the first that fails
	// (in this order) is the reason reported.
	Probes []Probe
	// Extra probes run after Probes: the hook for conditions other parts
	// of the server add (e.g. that the no-fsync store is of the current
	// generation).
	Extra []Probe
	// Interval between rounds and Timeout of each probe; zero: defaults.
	Interval, Timeout time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Report receives a line when the verdict changes (ready, or the
	// probe that fails); nil discards them.
	Report func(string)
}

// Result is the outcome of one round.
type Result struct {
	// Failed names the first probe that failed ("" when all passed) and
	// Reason says why.
	Failed, Reason string
	At             time.Time
}

// OK tells whether every probe passed.
func (r Result) OK() bool { return r.Failed == "" }

// Checker runs the probes and serves the last result.
type Checker struct {
	cfg Config

	mu   sync.Mutex
	last Result // zero until the first round ends
}

// New returns a Checker with cfg's defaults filled in; Run starts it.
func New(cfg Config) *Checker {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Report == nil {
		cfg.Report = func(string) {}
	}
	return &Checker{cfg: cfg}
}

// Run checks at once, then every Interval (jittered), until ctx ends.
func (c *Checker) Run(ctx context.Context) {
	for {
		c.CheckOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(Jittered(c.cfg.Interval, rand.Float64())):
		}
	}
}

// Jittered is d spread by ±20%: r, in [0, 1), picks where.
func Jittered(d time.Duration, r float64) time.Duration {
	return time.Duration(float64(d) * (1 - jitter + 2*jitter*r))
}

// CheckOnce runs every probe at once, each within Timeout, records the
// result and returns it.
func (c *Checker) CheckOnce(ctx context.Context) Result {
	probes := append(append([]Probe{}, c.cfg.Probes...), c.cfg.Extra...)
	errs := make([]error, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			defer cancel()
			errs[i] = p.Check(ctx)
		}()
	}
	wg.Wait()
	r := Result{At: c.cfg.Now()}
	for i, err := range errs {
		if err != nil {
			r.Failed, r.Reason = probes[i].Name, err.Error()
			break
		}
	}
	if ctx.Err() != nil { // a round cut short by the stop says nothing
		return r
	}
	c.mu.Lock()
	changed := c.last.At.IsZero() || c.last.Failed != r.Failed
	c.last = r
	c.mu.Unlock()
	switch {
	case !changed:
	case r.OK():
		c.cfg.Report("ready")
	default:
		c.cfg.Report(fmt.Sprintf("not ready: %s: %s", r.Failed, r.Reason))
	}
	return r
}

// Ready is the verdict now: nil when the last round passed and is recent,
// else why not.
func (c *Checker) Ready() error {
	c.mu.Lock()
	r := c.last
	c.mu.Unlock()
	now := c.cfg.Now()
	switch {
	case r.At.IsZero():
		return fmt.Errorf("not checked yet")
	case now.Sub(r.At) > staleIntervals*c.cfg.Interval:
		return fmt.Errorf("last checked %s ago (at %s): the check is stuck", now.Sub(r.At).Round(time.Second), r.At.UTC().Format(time.RFC3339))
	case !r.OK():
		return fmt.Errorf("%s: %s (at %s)", r.Failed, r.Reason, r.At.UTC().Format(time.RFC3339))
	}
	return nil
}

// Handler answers GET Path: 200 "ok", or 503 and why not.
func (c *Checker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := c.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v", err)
			return
		}
		fmt.Fprint(w, "ok")
	})
	return mux
}
