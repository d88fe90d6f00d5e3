package clusterload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// countedBackoff fires at once and counts its waits.
type countedBackoff struct{ waits *atomic.Int64 }

func (b countedBackoff) Backoff() clock.Timer {
	b.waits.Add(1)
	return clock.RealClock{}.NewTimer(0)
}

// What each watch call of a test does, in turn.
type watchStep int

const (
	streamEnds   watchStep = iota // a stream that ends cleanly: its server went away
	refused                       // no server listening
	throttled                     // 429
	otherFailure                  // a connection that broke: not the reflector's to retry
	versionGone                   // a stream whose first event is 410
	stays                         // a stream that stays open
)

// A reflector's watch resumes from its version after a refused or
// throttled call, waiting the backoff each time; a clean end watches
// again at once; a gone version or any other failure ends the
// ListAndWatch, and the next lists again after one more wait.
func TestFollowAsAReflectorWaitsTheBackoff(t *testing.T) {
	refusedErr := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name  string
		steps []watchStep
		want  reflectorRun
	}{
		{"server restarted", []watchStep{streamEnds, refused, throttled, versionGone},
			reflectorRun{Lists: 2, WatchedFrom: []string{"10", "10", "10", "10", "20"}, Waits: 3, Recovered: 1, Relists: 1}},
		{"connection broken", []watchStep{streamEnds, otherFailure},
			reflectorRun{Lists: 2, WatchedFrom: []string{"10", "10", "20"}, Waits: 1, Recovered: 1, Relists: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runReflector(t, c.steps, refusedErr)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// reflectorRun is what a followed watch did.
type reflectorRun struct {
	Lists                     int
	WatchedFrom               []string
	Waits, Recovered, Relists int64
	Down                      int64 // watches failed and not back
}

// runReflector follows a watch whose calls do steps, then stay open, and
// returns what it did once the watch after the steps is open.
func runReflector(t *testing.T, steps []watchStep, refusedErr error) reflectorRun {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var run reflectorRun
	var open []*watch.FakeWatcher
	defer func() {
		for _, w := range open {
			w.Stop()
		}
	}()
	lw := listWatch{
		list: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			run.Lists++
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(10 * run.Lists)}}, nil
		},
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			step := stays
			if n := len(run.WatchedFrom); n < len(steps) {
				step = steps[n]
			}
			run.WatchedFrom = append(run.WatchedFrom, o.ResourceVersion)
			switch step {
			case refused:
				return nil, refusedErr
			case throttled:
				return nil, apierrors.NewTooManyRequests("storage is (re)initializing", 1)
			case otherFailure:
				return nil, errors.New("unexpected EOF")
			}
			w := watch.NewFake()
			switch step {
			case streamEnds:
				go w.Stop()
			case versionGone:
				go func() {
					w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
					w.Stop()
				}()
			default:
				open = append(open, w)
			}
			return w, nil
		},
	}
	var waits atomic.Int64
	f := counts{reflectorRetry: true, newBackoff: func() wait.BackoffManager { return countedBackoff{&waits} }}
	go f.follow(ctx, lw, nil)
	watches := func() int64 { mu.Lock(); defer mu.Unlock(); return int64(len(run.WatchedFrom)) }
	if err := waitListed(ctx, watches, int64(len(steps)+1), time.Minute); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	run.Waits, run.Recovered, run.Relists, run.Down = waits.Load(), f.recovered.Load(), f.relists.Load(), f.down.Load()
	return run
}
