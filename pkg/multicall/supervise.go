package multicall

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"
)

// Backoff is how long a supervisor waits before it starts a component
// again: Initial after the first exit, doubled after each exit that
// followed a short run, at most Max; a run of ResetAfter or longer was
// healthy, and the wait after it is Initial again.
type Backoff struct {
	Initial, Max, ResetAfter time.Duration
}

// DefaultBackoff restarts a component that lost its leader election (it
// exits at once, by upstream design) within a second, and one that keeps
// crashing at most every 30 s.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}

// next is the wait after a run that lasted ran, when the wait before that
// run was last (0: none yet).
func (b Backoff) next(last, ran time.Duration) time.Duration {
	if last == 0 || ran >= b.ResetAfter {
		return b.Initial
	}
	return min(2*last, b.Max)
}

// Exit is one end of a supervised component while its server runs.
type Exit struct {
	Name   string
	Status string        // as the child's wait reported it: "exit status 1", "signal: killed"
	Ran    time.Duration // how long that run lasted
	Next   time.Duration // the wait before the next start
}

func (e Exit) String() string {
	return fmt.Sprintf("%s ended (%s) after %s; starting it again in %s", e.Name, e.Status, e.Ran.Round(time.Millisecond), e.Next)
}

// Supervised is a component the server runs as a child process of this
// binary (`k1m <Name> <Args>`) and starts again whenever it ends, for any
// reason: a lost leader election (upstream kube-controller-manager and
// kube-scheduler exit on it), a crash, a kill. Only the end of the
// server's context stops it for good.
type Supervised struct {
	Name    string
	Args    []string
	Env     []string // NAME=value on top of this process's environment
	Backoff Backoff
	OnExit  func(Exit) // reports each end that is followed by a start; may be nil

	// binary is the program started; "" means this binary (a test
	// starts its own test binary).
	binary string
}

// Supervise starts c and keeps it running until ctx ends. The returned
// channel is closed once ctx has ended and the last child has exited
// (SIGTERM, then SIGKILL after childStopDelay).
func Supervise(ctx context.Context, c Supervised) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		// Pdeathsig follows the thread that started the child, not the
		// process: a Go thread may end (one whose goroutine locked it and
		// returned), and its children would get SIGTERM. Every child is
		// started from this goroutine, on a thread kept until it returns.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c.loop(ctx)
	}()
	return stopped
}

func (c Supervised) loop(ctx context.Context) {
	var wait time.Duration
	for {
		started := time.Now()
		status := c.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		ran := time.Since(started)
		wait = c.Backoff.next(wait, ran)
		if c.OnExit != nil {
			c.OnExit(Exit{Name: c.Name, Status: status, Ran: ran, Next: wait})
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// runOnce runs the child until it ends and says how it ended.
func (c Supervised) runOnce(ctx context.Context) string {
	binary := c.binary
	if binary == "" {
		binary = selfBinary()
	}
	cmd := childCommand(ctx, binary, c.Name, c.Args)
	cmd.Env = append(os.Environ(), c.Env...) // a later entry wins over an inherited one
	if err := cmd.Start(); err != nil {
		return "not started: " + err.Error()
	}
	if err := cmd.Wait(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// selfBinary is the program this process runs: its path while that path
// still names it (the child is then called k1m in ps and ss, as its
// server is), else /proc/self/exe. An upgrade that replaced the file must
// not start a newer controller-manager beside this server's older
// kube-apiserver (the version skew policy forbids it) before the server
// itself restarts.
func selfBinary() string {
	if exe, err := os.Executable(); err == nil {
		named, err1 := os.Stat(exe)
		running, err2 := os.Stat("/proc/self/exe")
		if err1 == nil && err2 == nil && os.SameFile(named, running) {
			return exe
		}
	}
	return "/proc/self/exe"
}
