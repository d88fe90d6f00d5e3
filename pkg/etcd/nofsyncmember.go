package etcd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"k1m.dev/k1m/pkg/clock"
)

// NoFsyncMember is a server's member of the no-fsync group, kept in the
// group's current generation for as long as the server runs (Follow): it
// is replaced, on the same addresses and socket, when it finds itself in
// an older generation or in a group that lost its quorum.
type NoFsyncMember struct {
	durable *clientv3.Client
	member  Member
	tls     TLS
	report  func(string)
	errc    chan error

	mu         sync.Mutex
	running    *Running
	generation Generation
	hooksCtx   context.Context    // the current member's hooks run with it
	retire     context.CancelFunc // ends hooksCtx
	onStart    []func(context.Context, *Running)
	stopped    bool

	// followInterval and quorumLossTimeout, from the constants below
	// (shorter in tests).
	interval, quorumLoss time.Duration
}

// LoneNoFsync is the no-fsync member r of a lone server: a group of one
// that nothing replaces, its generations those of the server's starts.
func LoneNoFsync(r *Running) *NoFsyncMember {
	n := &NoFsyncMember{member: r.Member, report: func(string) {}, errc: make(chan error, 1)}
	n.install(r, Generation{})
	return n
}

// Member is what the member serves as (the same across replacements).
func (n *NoFsyncMember) Member() Member { return n.member }

// Running is the current member (nil while it is being replaced).
func (n *NoFsyncMember) Running() *Running {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running
}

// Generation is the generation the current member is in.
func (n *NoFsyncMember) Generation() Generation {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.generation
}

// Err reports a fatal error of the current member; a member stopped to be
// replaced reports nothing.
func (n *NoFsyncMember) Err() <-chan error { return n.errc }

// OnStart runs hook for the current member and for every member that
// replaces it, with a context that ends when that member is replaced or
// stopped (the alarm and disk watches of pkg/server).
func (n *NoFsyncMember) OnStart(hook func(context.Context, *Running)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.onStart = append(n.onStart, hook)
	if n.running != nil {
		hook(n.hooksCtx, n.running)
	}
}

// install makes r, in generation g, the current member.
func (n *NoFsyncMember) install(r *Running, g Generation) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		r.Stop()
		return
	}
	n.running, n.generation = r, g
	n.hooksCtx, n.retire = context.WithCancel(context.Background())
	for _, hook := range n.onStart {
		hook(n.hooksCtx, r)
	}
	go n.forwardErr(r)
}

// forwardErr passes on r's fatal error while r is the current member.
func (n *NoFsyncMember) forwardErr(r *Running) {
	err, ok := <-r.Err()
	n.mu.Lock()
	current := n.running == r && !n.stopped
	n.mu.Unlock()
	if !current {
		return
	}
	if !ok || err == nil {
		err = errors.New("stopped")
	}
	select {
	case n.errc <- err:
	default:
	}
}

// takeOut stops the current member, which is then no longer current.
func (n *NoFsyncMember) takeOut() {
	n.mu.Lock()
	r := n.running
	n.running = nil
	if n.retire != nil {
		n.retire()
		n.retire = nil
	}
	n.mu.Unlock()
	if r != nil {
		r.Stop()
	}
}

func (n *NoFsyncMember) isStopped() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopped
}

// Stop stops the member for good.
func (n *NoFsyncMember) Stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.takeOut()
}

// The watch over the generation: a server reads the record every
// followInterval (with jitter), about one linearizable read of the durable
// etcd per server per interval, whatever the number of nodes.
const (
	followInterval = 5 * time.Second
	// quorumLossTimeout is how long the member's group may take no writes
	// before this server replaces it: longer than an election (about a
	// second) and a member's restart (a few seconds), shorter than a
	// node's Lease grace period (40 s by default), so that Leases move
	// to a working group before nodes are marked NotReady.
	quorumLossTimeout = 20 * time.Second
)

// Follow keeps the member in the current generation until ctx ends:
// when the durable etcd records a newer generation, or the member's group
// has taken no writes for quorumLossTimeout, the member is stopped,
// emptied and enters the group again (which starts the next generation
// if the group is gone). A server cut off from the durable etcd's quorum
// changes nothing: it cannot tell which generation is current.
func (n *NoFsyncMember) Follow(ctx context.Context) {
	lastWrite := time.Now()
	for {
		if err := clock.Sleep(ctx, jittered(n.interval)); err != nil || n.isStopped() {
			return
		}
		state, reason := n.check(ctx)
		switch {
		case state == memberCurrent:
			lastWrite = time.Now()
			continue
		case state == memberUnknown:
			continue
		case state == memberNoQuorum && time.Since(lastWrite) < n.quorumLoss:
			continue
		}
		n.report(fmt.Sprintf("%s: %s: leaving it for the current group", n.member.label(), reason))
		n.takeOut()
		if err := n.enter(ctx); err != nil {
			n.report(fmt.Sprintf("%s: could not enter the current no-fsync group: %v (trying again in %s)", n.member.label(), err, n.interval))
			continue
		}
		lastWrite = time.Now()
	}
}

// memberState is what a check found.
type memberState int

const (
	memberCurrent  memberState = iota // in the current generation, whose group takes writes
	memberUnknown                     // the durable etcd did not answer: nothing to decide
	memberStale                       // in an older generation, or in none
	memberNoQuorum                    // in the current generation, whose group takes no writes
)

// check reads the recorded generation and tries the member's group.
func (n *NoFsyncMember) check(ctx context.Context) (memberState, string) {
	g, err := ReadGeneration(ctx, n.durable)
	if err != nil {
		return memberUnknown, err.Error()
	}
	mine := n.Generation()
	switch {
	case n.Running() == nil:
		return memberStale, "not in any group"
	case g.Number != mine.Number:
		return memberStale, fmt.Sprintf("it is in no-fsync generation %d, the current one is %s", mine.Number, g)
	}
	if err := memberTakesWrites(ctx, n.member.ClientURL(), n.tls); err != nil {
		return memberNoQuorum, fmt.Sprintf("its group (no-fsync %s) takes no writes (%v)", g, err)
	}
	return memberCurrent, ""
}

// Current returns nil when the member is in the recorded generation and
// its group takes writes, else why not: k1m's readiness check.
func (n *NoFsyncMember) Current(ctx context.Context) error {
	if n.durable == nil { // a lone server's
		if n.Running() == nil {
			return errors.New("the no-fsync member is stopped")
		}
		return nil
	}
	g, err := ReadGeneration(ctx, n.durable)
	if err != nil {
		return err
	}
	if mine := n.Generation(); g.Number != mine.Number || n.Running() == nil {
		return fmt.Errorf("the no-fsync member is not in the current generation (%s): it is moving there", g)
	}
	return memberTakesWrites(ctx, n.member.ClientURL(), n.tls)
}

// jittered is d ± 20%, so that servers started together do not read the
// durable etcd in step.
func jittered(d time.Duration) time.Duration {
	return d*4/5 + rand.N(d*2/5+1)
}
