package podnet

import (
	"context"
	"testing"

	"golang.org/x/time/rate"
)

// The routes written a second times the nodes each reaches stay at the
// budget between the floor and the ceiling.
func TestRouteWriteRateKeepsTheEventsPerSecond(t *testing.T) {
	for _, tc := range []struct {
		nodes, budget int
		want          rate.Limit
	}{
		{0, 2500, 200}, {1, 2500, 200}, {12, 2500, 200}, {13, 2500, 192.30769230769232}, {100, 2500, 25}, {500, 2500, 5}, {2000, 2500, 5}, {100000, 2500, 5},
		{2000, 100_000, 50}, {100, 100_000, 200}, {100000, 100_000, 5}, {10, 1, 5},
	} {
		if got := routeWriteRate(tc.nodes, tc.budget); got != tc.want {
			t.Errorf("routeWriteRate(%d, %d) = %v, want %v", tc.nodes, tc.budget, got, tc.want)
		}
	}
}

// The pacing follows the Node count its handlers keep, and lets one
// second's writes go at once.
func TestWritePacingFollowsTheNodeCount(t *testing.T) {
	p := newWritePacing(2500)
	h := p.handlers()
	for i := 0; i < 120; i++ {
		h.OnAdd(nil, true)
	}
	for i := 0; i < 20; i++ {
		h.OnDelete(nil)
	}
	ctx := context.Background()
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, burst := p.limiter.Limit(), p.limiter.Burst(); got != 25 || burst != 25 {
		t.Errorf("with 100 nodes: %v writes a second, bursts of %d; want 25 and 25", got, burst)
	}
	for i := 0; i < 400; i++ {
		h.OnAdd(nil, false)
	}
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, burst := p.limiter.Limit(), p.limiter.Burst(); got != 5 || burst != 5 {
		t.Errorf("with 500 nodes: %v writes a second, bursts of %d; want 5 and 5", got, burst)
	}
}
