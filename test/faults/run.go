package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Campaign timings.
const (
	// writeInterval paces each writer: 10 writes/s per API server.
	writeInterval = 100 * time.Millisecond
	// baseline is how long the traffic runs before the fault.
	baseline = 5 * time.Second
	// convergeTimeout bounds the wait for the cluster to be whole again
	// after the heal.
	convergeTimeout = 3 * time.Minute
	// writesWithin is how soon after the heal a write must be
	// acknowledged through every server.
	writesWithin = 30 * time.Second
)

// Result is one scenario run's row of the table, and its evidence.
type Result struct {
	Scenario string
	Acked    int
	Missing  int
	// Stall is the longest time no writer had a write acknowledged,
	// from the fault to the end of the run.
	Stall time.Duration
	// NotReady is, per node seen NotReady, for how many seconds.
	NotReady map[string]int
	// Converge is from the heal until the cluster was whole again;
	// negative when it was not within convergeTimeout.
	Converge time.Duration
	// Failed names each invariant that failed; Evidence says how.
	Failed   []string
	Evidence []string
	Took     time.Duration
}

// Passed tells whether every invariant held.
func (r Result) Passed() bool { return len(r.Failed) == 0 }

func (r *Result) fail(invariant, format string, args ...any) {
	if len(r.Failed) == 0 || r.Failed[len(r.Failed)-1] != invariant {
		r.Failed = append(r.Failed, invariant)
	}
	r.Evidence = append(r.Evidence, invariant+": "+fmt.Sprintf(format, args...))
}

// The invariants, as the table names them.
const (
	invFault    = "fault injected and healed"
	invLost     = "no acknowledged write lost"
	invNotReady = "no other node NotReady"
	invConverge = "servers converge"
	invWrites   = "writes through every server within 30 s"
)

// Run runs scenario s once on the fixture: traffic, the fault and its
// heal, then the checks. The namespace it writes into is deleted after.
func (f *Fixture) Run(ctx context.Context, s Scenario, ns string) Result {
	began := time.Now()
	r := Result{Scenario: s.Name, Converge: -1}
	if err := f.createNamespace(ctx, ns); err != nil {
		r.fail(invFault, "creating namespace %s: %v", ns, err)
		return r
	}
	var writers []*Writer
	for i := 1; i <= Servers; i++ {
		writers = append(writers, StartWriter(ctx, f.Client(i), ns, fmt.Sprintf("server-%d", i), writeInterval))
	}
	mon := StartMonitor(ctx, f, time.Second)
	time.Sleep(baseline)
	faulted := time.Now()
	f.logf("scenario %s: %s", s.Name, s.What)
	if err := s.Run(ctx, f); err != nil {
		r.fail(invFault, "%v", err)
	}
	healed := time.Now()
	f.waitConverged(ctx, healed, &r)
	for i, w := range writers {
		at := w.FirstAckAfter(ctx, healed, max(0, writesWithin-time.Since(healed)))
		switch {
		case at.IsZero():
			r.fail(invWrites, "no write acknowledged through server %d within %s of the heal", i+1, writesWithin)
		case at.Sub(healed) > writesWithin:
			r.fail(invWrites, "the first write through server %d after the heal was acknowledged %s after it", i+1, at.Sub(healed).Round(100*time.Millisecond))
		}
	}
	report := mon.Stop()
	var times []time.Time
	acked := map[int][]string{}
	for i, w := range writers {
		times = append(times, w.Times()...)
		acked[i+1] = w.Stop()
		r.Acked += len(acked[i+1])
	}
	r.Stall = LongestStall(times, faulted, time.Now()).Round(100 * time.Millisecond)
	r.NotReady = report.NotReadySeconds
	for _, v := range report.Violations {
		r.fail(invNotReady, "%s", v)
	}
	r.Missing = f.checkWrites(ctx, ns, acked, &r)
	if len(report.OldestLease) > 0 {
		r.Evidence = append(r.Evidence, fmt.Sprintf("oldest Lease renewal seen per node (not excused): %v", report.OldestLease))
	}
	f.deleteNamespace(ctx, ns)
	r.Took = time.Since(began).Round(time.Second)
	return r
}

// waitConverged polls until the cluster is whole again, recording the
// time it took or, after convergeTimeout, why it is not.
func (f *Fixture) waitConverged(ctx context.Context, healed time.Time, r *Result) {
	var err error
	for time.Since(healed) < convergeTimeout {
		if err = f.converged(ctx, healed); err == nil {
			r.Converge = time.Since(healed).Round(time.Second)
			f.clearExcused()
			return
		}
		time.Sleep(2 * time.Second)
	}
	r.fail(invConverge, "not whole %s after the heal: %v", convergeTimeout, err)
	for i := 1; i <= Servers; i++ {
		if !f.H.ServerRunning(i) {
			log := f.H.Server(i).LogFile
			r.fail(invConverge, "server %d's process exited; the end of %s:\n%s", i, log, lastLines(log, 8))
		}
	}
}

// lastLines are the last n lines of file, for the evidence.
func lastLines(file string, n int) string {
	data, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkWrites lists the namespace through every server and wants every
// acknowledged write; it returns how many are missing through the server
// that misses most. A server that cannot list (dead, or its API server
// not serving: already a failure to converge) is noted, not counted as
// losing writes, unless no server can list.
func (f *Fixture) checkWrites(ctx context.Context, ns string, acked map[int][]string, r *Result) int {
	var all []string
	for i := 1; i <= Servers; i++ {
		all = append(all, acked[i]...)
	}
	worst, listed := 0, 0
	for i := 1; i <= Servers; i++ {
		missing, err := Missing(ctx, f.Client(i), ns, all)
		if err != nil {
			r.Evidence = append(r.Evidence, fmt.Sprintf("%s: not checked through server %d: %v", invLost, i, err))
			continue
		}
		listed++
		worst = max(worst, len(missing))
		if len(missing) > 0 {
			sort.Strings(missing)
			r.fail(invLost, "%d of %d acknowledged ConfigMaps missing through server %d, e.g. %v", len(missing), len(all), i, missing[:min(5, len(missing))])
		}
	}
	if listed == 0 {
		r.fail(invLost, "no server lists %s: %d acknowledged writes not checked", ns, len(all))
	}
	return worst
}

// createNamespace creates ns through the first server that takes it.
func (f *Fixture) createNamespace(ctx context.Context, ns string) error {
	var errs []error
	for i := 1; i <= Servers; i++ {
		_, err := f.Client(i).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteNamespace deletes ns (in the background: its ConfigMaps go with
// it), so that the next scenario's lists stay small.
func (f *Fixture) deleteNamespace(ctx context.Context, ns string) {
	for i := 1; i <= Servers; i++ {
		if f.Client(i).CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) == nil {
			return
		}
	}
}
