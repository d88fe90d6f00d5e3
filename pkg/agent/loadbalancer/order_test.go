package loadbalancer

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

var apiServers = []string{"[fddf:4035:b520::1]:6443", "[fddf:4035:b520::2]:6443", "[fddf:4035:b520::3]:6443"}

func nodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("k1m-node-%d", i+1)
	}
	return names
}

// 1,000 nodes over 3 servers: each server is preferred by about a third,
// whatever order the list comes in, and the same each time.
func TestOrderSpreadsNodesEvenlyAndStably(t *testing.T) {
	reversed := slices.Clone(apiServers)
	slices.Reverse(reversed)
	share := map[string]int{}
	for _, n := range nodeNames(1000) {
		o := Order(n, apiServers)
		if again := Order(n, reversed); !reflect.DeepEqual(o, again) {
			t.Fatalf("%s: order %v for one list order, %v for another", n, o, again)
		}
		if sorted := slices.Sorted(slices.Values(o)); !reflect.DeepEqual(sorted, apiServers) {
			t.Fatalf("%s: order %v is not a permutation of %v", n, o, apiServers)
		}
		share[o[0]]++
	}
	for _, s := range apiServers {
		if pct := share[s] / 10; pct < 25 || pct > 42 {
			t.Errorf("%s is preferred by %d%% of the nodes (%v), want 25-42%%", s, pct, share)
		}
	}
	// A fixed point, so that a change of the hash shows: these names
	// must keep their servers from one release to the next.
	got := []string{Order("k1m-node-1", apiServers)[0], Order("k1m-node-2", apiServers)[0], Order("k1m-node-3", apiServers)[0]}
	if want := []string{apiServers[2], apiServers[1], apiServers[2]}; !reflect.DeepEqual(got, want) {
		t.Errorf("k1m-node-1..3 prefer %v, want %v (the hash changed: every node would move at the upgrade)", got, want)
	}
}

// When a server leaves, only its nodes move, and they spread over the
// others instead of all landing on one.
func TestOrderMovesOnlyTheNodesOfALeavingServer(t *testing.T) {
	four := append(slices.Clone(apiServers), "[fddf:4035:b520::4]:6443")
	gone := four[1]
	moved := map[string]int{}
	for _, n := range nodeNames(1000) {
		before := Order(n, four)
		after := Order(n, slices.DeleteFunc(slices.Clone(four), func(s string) bool { return s == gone }))
		if before[0] != gone {
			if after[0] != before[0] {
				t.Fatalf("%s moved from %s to %s although %s stayed", n, before[0], after[0], before[0])
			}
			continue
		}
		// Its fail-over order is the rest of its order.
		if want := slices.DeleteFunc(slices.Clone(before), func(s string) bool { return s == gone }); !reflect.DeepEqual(after, want) {
			t.Fatalf("%s: order %v after %s left, want %v", n, after, gone, want)
		}
		moved[after[0]]++
	}
	total := 0
	for _, c := range moved {
		total += c
	}
	for _, s := range four {
		if s == gone {
			continue
		}
		if pct := moved[s] * 100 / total; pct < 20 || pct > 47 {
			t.Errorf("%s took %d%% of the %d moved nodes (%v), want about a third", s, pct, total, moved)
		}
	}
}
