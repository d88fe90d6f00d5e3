package scaleout

import (
	"math"
	"slices"

	"k1m.dev/k1m/bench/stats"
)

var nan = math.NaN()

// Split is where a renewal's CPU goes, in CPU-seconds per renewal, the
// servers' idle work taken out (IdleCores times the window).
type Split struct {
	// Lone is the lone server's (cluster B) whole cost: median of its
	// floods.
	Lone float64
	// ThroughOne is cluster A's three servers together, flooded through
	// server 1 alone: median of those floods.
	ThroughOne float64
	// Raft is ThroughOne - Lone: what running the Leases' store as a
	// raft group of three costs per renewal.
	Raft float64
	// Followers is the mean cost of the servers that, flooded through
	// server 1 alone, neither served a renewal nor led raft: median of
	// those floods.
	Followers float64

	// Leader is the server whose no-fsync member led raft in every flood
	// of the fit.
	Leader int
	// FrontEnd is the fitted cost of a renewal at the API server it goes
	// through; Base[k-1] is server k's cost per renewal of the cluster,
	// whoever served it (fit: cost_k = Base_k + share_k * FrontEnd).
	FrontEnd float64
	Base     []float64
	// LeaderBase is the leader's Base; FollowerBase the mean of the
	// others'.
	LeaderBase, FollowerBase float64
	// Fitted and Left are cluster A's floods in the fit and those left
	// out because the leader changed during them or was another server.
	Fitted, Left int
}

// point is one server in one flood of cluster A.
type point struct {
	server       int
	share, spent float64 // share of the renewals served; CPU-s per renewal
}

// Split computes the split from the floods.
func (r *Result) Split() Split {
	s := Split{Lone: nan, ThroughOne: nan, Raft: nan, Followers: nan, FrontEnd: nan, LeaderBase: nan, FollowerBase: nan}
	var lone, one, followers []float64
	for _, f := range r.Floods {
		idle := r.idle(f.Cluster)
		switch {
		case f.Cluster == ClusterB:
			lone = append(lone, f.marginalTotal(idle))
		case f.ViaText() == "1":
			one = append(one, f.marginalTotal(idle))
			if v := f.plainFollowers(idle); !math.IsNaN(v) {
				followers = append(followers, v)
			}
		}
	}
	s.Lone, s.ThroughOne, s.Followers = median(lone), median(one), median(followers)
	s.Raft = s.ThroughOne - s.Lone
	s.fit(r)
	return s
}

// idle is the idle rate of each server of the cluster (zeros when not
// read).
func (r *Result) idle(cluster string) []float64 {
	for _, c := range r.Clusters {
		if c.Name == cluster {
			return c.IdleCores
		}
	}
	return make([]float64, ServersOf(cluster))
}

func idleOf(idle []float64, k int) float64 {
	if k-1 < len(idle) {
		return idle[k-1]
	}
	return 0
}

func (f Flood) marginalTotal(idle []float64) float64 {
	total := 0.0
	for k := 1; k <= len(f.Usage); k++ {
		total += f.marginal(k, idleOf(idle, k))
	}
	return total
}

// plainFollowers is the mean cost of the servers that neither served
// the flood nor led raft throughout it; NaN when there is none.
func (f Flood) plainFollowers(idle []float64) float64 {
	if !f.leaderKept() {
		return nan
	}
	var sum float64
	n := 0
	for k := 1; k <= len(f.Usage); k++ {
		if k != f.Leader && !slices.Contains(f.Via, k) {
			sum += f.marginal(k, idleOf(idle, k))
			n++
		}
	}
	if n == 0 {
		return nan
	}
	return sum / float64(n)
}

// fit fits cost_k = Base_k + share_k * FrontEnd over cluster A's floods
// whose leader was the same server throughout (the most common leader),
// by least squares with one intercept per server and one common slope:
// the slope comes from how each server's cost moves with its share, so a
// server's role (leader, follower) stays in its own intercept.
func (s *Split) fit(r *Result) {
	s.Leader = r.commonLeader()
	var points []point
	for _, f := range r.Floods {
		if f.Cluster != ClusterA || f.Result.Updates == 0 {
			continue
		}
		if !f.leaderKept() || f.Leader != s.Leader {
			s.Left++
			continue
		}
		s.Fitted++
		idle := r.idle(f.Cluster)
		for k := 1; k <= len(f.Usage); k++ {
			points = append(points, point{server: k, share: f.Share(k), spent: f.marginal(k, idleOf(idle, k))})
		}
	}
	s.FrontEnd, s.Base = fixedEffects(points, ServersOf(ClusterA))
	if s.Leader < 1 || len(s.Base) < s.Leader || math.IsNaN(s.FrontEnd) {
		return
	}
	s.LeaderBase = s.Base[s.Leader-1]
	var others []float64
	for k, b := range s.Base {
		if k+1 != s.Leader {
			others = append(others, b)
		}
	}
	s.FollowerBase = mean(others)
}

// commonLeader is the server that led raft throughout most of cluster
// A's floods; 0 when none is known.
func (r *Result) commonLeader() int {
	count := map[int]int{}
	best := 0
	for _, f := range r.Floods {
		if f.Cluster == ClusterA && f.leaderKept() {
			count[f.Leader]++
			if count[f.Leader] > count[best] || (count[f.Leader] == count[best] && f.Leader < best) {
				best = f.Leader
			}
		}
	}
	return best
}

// fixedEffects is least squares of spent = base[server] + share * slope:
// the slope from every server's deviations from its own means; NaN
// slope when no server's share varied.
func fixedEffects(points []point, servers int) (slope float64, base []float64) {
	sumShare, sumSpent, n := make([]float64, servers), make([]float64, servers), make([]float64, servers)
	for _, p := range points {
		sumShare[p.server-1] += p.share
		sumSpent[p.server-1] += p.spent
		n[p.server-1]++
	}
	var sxy, sxx float64
	for _, p := range points {
		k := p.server - 1
		dx := p.share - sumShare[k]/n[k]
		sxy += dx * (p.spent - sumSpent[k]/n[k])
		sxx += dx * dx
	}
	if sxx == 0 {
		return nan, nil
	}
	slope = sxy / sxx
	base = make([]float64, servers)
	for k := range base {
		base[k] = nan
		if n[k] > 0 {
			base[k] = (sumSpent[k] - slope*sumShare[k]) / n[k]
		}
	}
	return slope, base
}

// Renewals is the predicted ceiling, in renewals/s, of n servers on
// machines of cores cores each, every server an API server and a member
// of the raft group. One server is the measured lone server. For more,
// every renewal costs FrontEnd once (at the server that serves it),
// LeaderBase at the leader and FollowerBase at each other server, so n
// machines carry at most n*cores over the sum; and the leader's machine
// (each follower's too) must carry its base for every renewal of the
// cluster even when it serves none: cores/LeaderBase is the raft
// group's own ceiling.
func (s Split) Renewals(n int, cores float64) float64 {
	if n == 1 {
		return capacity(cores, s.Lone)
	}
	each := s.FrontEnd + s.LeaderBase + float64(n-1)*s.FollowerBase
	return min(capacity(float64(n)*cores, each), capacity(cores, s.LeaderBase), capacity(cores, s.FollowerBase))
}

// capacity is how many renewals/s cores carry at cost CPU-s each: NaN
// for an unknown cost, unbounded for none.
func capacity(cores, cost float64) float64 {
	switch {
	case math.IsNaN(cost):
		return nan
	case cost <= 0:
		return math.Inf(1)
	}
	return cores / cost
}

func median(vals []float64) float64 {
	var known []float64
	for _, v := range vals {
		if !math.IsNaN(v) {
			known = append(known, v)
		}
	}
	if len(known) == 0 {
		return nan
	}
	return stats.Median(known)
}

func mean(vals []float64) float64 {
	if len(vals) == 0 {
		return nan
	}
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	return sum / float64(len(vals))
}
