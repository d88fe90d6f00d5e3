package podnet

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/tools/cache"
)

// The routes written a second times the nodes each reaches stay at the
// budget between the floor and the ceiling.
func TestRouteWriteRateKeepsTheEventsPerSecond(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		want  rate.Limit
	}{
		{0, 200}, {1, 200}, {500, 200}, {501, 199.6007984031936}, {2000, 50}, {10000, 10}, {20000, 5}, {100000, 5},
	} {
		if got := routeWriteRate(tc.nodes); got != tc.want {
			t.Errorf("routeWriteRate(%d) = %v, want %v", tc.nodes, got, tc.want)
		}
	}
}

// The pacing follows the Node count, counted again only after
// pacingRecount, and lets one second's writes go at once.
func TestWritePacingFollowsTheNodeCount(t *testing.T) {
	nodes := cache.NewStore(cache.MetaNamespaceKeyFunc)
	keys := 0
	addKeys := func(n int) {
		for i := 0; i < n; i++ {
			keys++
			if err := nodes.Add(cache.ExplicitKey("node-" + strconv.Itoa(keys))); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := time.Unix(1000, 0)
	p := newWritePacing(nodes, func() time.Time { return now })
	ctx := context.Background()
	addKeys(2000)
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, burst := p.limiter.Limit(), p.limiter.Burst(); got != 50 || burst != 50 {
		t.Errorf("with 2,000 nodes: %v writes a second, bursts of %d; want 50 and 50", got, burst)
	}
	addKeys(8000)
	now = now.Add(pacingRecount - time.Second)
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.limiter.Limit(); got != 50 {
		t.Errorf("10,000 nodes before the recount: %v writes a second, want the 50 counted before", got)
	}
	now = now.Add(time.Second)
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, burst := p.limiter.Limit(), p.limiter.Burst(); got != 10 || burst != 10 {
		t.Errorf("with 10,000 nodes, recounted: %v writes a second, bursts of %d; want 10 and 10", got, burst)
	}
}
