package scaleout

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/proc"
)

// The synthetic cluster A of the tests: every renewal costs frontEnd at
// the server that serves it and base[k] at server k (server 1 leads);
// the lone server costs lone; every server idles at idle[k] cores.
const (
	frontEnd = 400e-6
	lone     = 700e-6
	renewals = 9000
	window   = 20 * time.Second
)

var (
	base     = []float64{300e-6, 200e-6, 200e-6}
	idleA    = []float64{0.05, 0.02, 0.02}
	idleLone = []float64{0.04}
)

// flood is a flood of cluster A through via, its renewals shared evenly,
// each server's CPU what the model says plus its idle work.
func flood(via []int, leader, leaderAfter int) Flood {
	f := Flood{Cluster: ClusterA, Via: via, Round: 1, Leader: leader, LeaderAfter: leaderAfter,
		Result: leaseflood.Result{Updates: renewals, Elapsed: window, Rate: renewals / window.Seconds()}}
	for range via {
		f.Result.UpdatesBy = append(f.Result.UpdatesBy, renewals/int64(len(via)))
	}
	for k := 1; k <= 3; k++ {
		seconds := (base[k-1]+f.Share(k)*frontEnd)*renewals + idleA[k-1]*window.Seconds()
		f.Usage = append(f.Usage, proc.Usage{CPU: time.Duration(math.Round(seconds * 1e9)), RSS: 512 << 20})
	}
	f.LoadGen = proc.Usage{CPU: 9 * time.Second}
	return f
}

func synthetic() *Result {
	loneFlood := Flood{Cluster: ClusterB, Via: []int{1}, Round: 1, Leader: 1, LeaderAfter: 1,
		Result: leaseflood.Result{Updates: renewals, UpdatesBy: []int64{renewals}, Elapsed: window, Rate: renewals / window.Seconds()},
		Usage:  []proc.Usage{{CPU: time.Duration(math.Round((lone*renewals + idleLone[0]*window.Seconds()) * 1e9))}}}
	garbage := flood([]int{1, 2}, 1, 2) // the leader changed: left out of the fit
	garbage.Usage[0].CPU *= 3
	return &Result{Cores: 2, ServerMemory: "3Gi",
		Clusters: []ClusterInfo{{Name: ClusterA, IdleCores: idleA}, {Name: ClusterB, IdleCores: idleLone}},
		Floods:   []Flood{flood([]int{1}, 1, 1), flood([]int{1, 2}, 1, 1), garbage, flood([]int{1, 2, 3}, 1, 1), loneFlood}}
}

// micro rounds CPU-seconds to whole CPU-nanoseconds, so that float
// arithmetic compares exactly.
func micro(v float64) float64 { return math.Round(v*1e9) / 1e9 }

func TestSplitRecoversTheCostsAndLeavesOutALeaderChange(t *testing.T) {
	s := synthetic().Split()
	s.Lone, s.ThroughOne, s.Raft, s.Followers = micro(s.Lone), micro(s.ThroughOne), micro(s.Raft), micro(s.Followers)
	s.FrontEnd, s.LeaderBase, s.FollowerBase = micro(s.FrontEnd), micro(s.LeaderBase), micro(s.FollowerBase)
	for k := range s.Base {
		s.Base[k] = micro(s.Base[k])
	}
	want := Split{Lone: 700e-6, ThroughOne: 1100e-6, Raft: 400e-6, Followers: 200e-6, Leader: 1,
		FrontEnd: 400e-6, Base: []float64{300e-6, 200e-6, 200e-6}, LeaderBase: 300e-6, FollowerBase: 200e-6, Fitted: 3, Left: 1}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("split\n%+v\nwant\n%+v", s, want)
	}
}

func TestSplitWithoutVariedSharesIsUnknown(t *testing.T) {
	r := synthetic()
	r.Floods = r.Floods[:1] // through server 1 only: no share varies
	s := r.Split()
	if !math.IsNaN(s.FrontEnd) || !math.IsNaN(s.LeaderBase) || !math.IsNaN(s.Renewals(3, 2)) {
		t.Errorf("front end %v, leader base %v, 3 servers %v: want unknown (NaN)", s.FrontEnd, s.LeaderBase, s.Renewals(3, 2))
	}
	if !strings.Contains(Prediction(s, 2, nil), "1/F = n/a renewals/s") {
		t.Errorf("the prediction does not say the front end is unknown:\n%s", Prediction(s, 2, nil))
	}
}

func TestRenewalsPredicted(t *testing.T) {
	s := Split{Lone: 700e-6, FrontEnd: 400e-6, LeaderBase: 300e-6, FollowerBase: 200e-6}
	// 1: 2/700us; 2-4: 2n/(400+300+(n-1)200)us; from 5 on the leader's
	// ceiling 2/300us.
	want := []float64{2857, 4444, 5455, 6154, 6667, 6667, 6667}
	for n := 1; n <= 7; n++ {
		if got := math.Round(s.Renewals(n, 2)); got != want[n-1] {
			t.Errorf("%d servers: %v renewals/s, want %v", n, got, want[n-1])
		}
	}
}

func TestPredictionText(t *testing.T) {
	s := Split{Lone: 700e-6, ThroughOne: 1100e-6, Raft: 400e-6, Followers: 200e-6, Leader: 1,
		FrontEnd: 400e-6, Base: []float64{300e-6, 200e-6, 200e-6}, LeaderBase: 300e-6, FollowerBase: 200e-6, Fitted: 3, Left: 1}
	got := Prediction(s, 2, []float64{600, 590.4, 1610})
	want := `
### What the figures predict (derived, not measured)

Here every server and the load generator share the machine's 2 cores, so renewals/s through 1, 2 and 3 API servers (600, 590, 1,610) show this machine's limit, not the API servers'. What more cores and machines would carry is derived from where the CPU went:

In each flood of cluster "3-servers", server k's cost c_k is its CPU over the window less its idle rate times the window, divided by every renewal of the flood, and share_k is the fraction of the renewals that went through its API server. A least-squares fit of c_k = base_k + share_k x F over 3 floods (one base per server, one F for all; 1 left out because the raft leader was another server or changed) gives:

- F = 400 CPU-µs per renewal, the front end: what the API server a renewal goes through spends on it (the request, admission, encoding, its local etcd member taking the write to the leader, the change sent to the watchers it holds);
- base of the raft leader (server 1) = 300 µs per renewal of the cluster, whoever served it: raft replication and apply, and its own watch cache;
- base of a follower = 200 µs (mean of the others): raft follower work and apply, and its own watch cache.

Hence, on machines of C = 2 cores like this one:

- one more core of API server carries 1/F = 2,500 renewals/s, while the raft leader has room;
- one raft group tops out at C / base_leader = 6,667 renewals/s: its leader pays base_leader for every renewal of the cluster even when it serves none (3,333 per core of the leader's machine, if etcd's work spread over every core; its apply loop is one goroutine, so expect less);
- n servers, each an API server and a raft member, carry at most min(n x C / (F + base_leader + (n-1) x base_follower), C / base_leader, C / base_follower): every renewal costs F once, base_leader at the leader and base_follower at every other server; so each added machine adds less, and none adds past the leader's ceiling. One server is the lone server's measured cost, C / c_lone. Base figures were measured with two followers; with more members the leader sends each entry to each, and an API-server-only server (--disable-etcd) pays its watch cache but no raft, so read the larger n as estimates.

| servers | renewals/s (predicted) | added by the last server |
|---|---|---|
| 1 | 2,857 | - |
| 2 | 4,444 | 1,587 |
| 3 | 5,455 | 1,010 |
| 4 | 6,154 | 699 |
| 5 | 6,667 | 513 |
| 6 | 6,667 | 0 |
| 7 | 6,667 | 0 |
`
	if got != want {
		t.Errorf("prediction:\n%s\nwant:\n%s", got, want)
	}
}

func TestFloodFigures(t *testing.T) {
	f := flood([]int{1, 2, 3}, 1, 1)
	// Server 1: (300 + 400/3) us per renewal, plus 0.05 cores x 20 s over
	// 9000 renewals = 111.1 us.
	if got, want := math.Round(f.CPUPerRenewal(1)*1e7)/10, 544.4; got != want {
		t.Errorf("server 1: %v CPU-us/renewal, want %v", got, want)
	}
	if got := f.Share(2); got != 1.0/3 {
		t.Errorf("server 2's share %v, want 1/3", got)
	}
	if got := f.Share(4); got != 0 {
		t.Errorf("a server not flooded through has share %v", got)
	}
	r := &Result{Floods: []Flood{f}}
	row := r.CSVRows()[0]
	want := []string{"3-servers", "1,2,3", "1", "1", "1", "450", "0", "0", "0", "0",
		"150", "544.4444444444445", "512", "150", "377.77777777777777", "512", "150", "377.77777777777777", "512",
		"1300", "1000", "1.035", "20"}
	if !reflect.DeepEqual(row, want) {
		t.Errorf("CSV row\n%q\nwant\n%q", row, want)
	}
	if len(r.CSVHeader()) != len(row) {
		t.Errorf("CSV header has %d columns, rows %d", len(r.CSVHeader()), len(row))
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 2857.14: "2,857",
		math.NaN(): "n/a", math.Inf(1): "unbounded"} {
		if got := num(v, 0); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
	if got := num(1234.56, 1); got != "1,234.6" {
		t.Errorf("num(1234.56, 1) = %q", got)
	}
}
