package stats

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	// 1..100 ms in reverse order: the p-th percentile is p ms.
	var samples []time.Duration
	for i := 100; i >= 1; i-- {
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	for _, p := range []float64{1, 50, 90, 99, 100} {
		if got, want := Percentile(samples, p), time.Duration(p)*time.Millisecond; got != want {
			t.Errorf("Percentile(1..100ms, %v) = %v, want %v", p, got, want)
		}
	}
	if samples[0] != 100*time.Millisecond {
		t.Errorf("Percentile sorted its input in place")
	}
}

func TestPercentileSmallSets(t *testing.T) {
	cases := []struct {
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{nil, 99, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond}, // ceil(0.5*4)=2nd
		{ms(1, 2, 3, 4), 51, 3 * time.Millisecond}, // ceil(0.51*4)=3rd
		{ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{ms(5, 1, 1000, 2, 3, 4, 6, 7, 8, 9), 90, 9 * time.Millisecond}, // one outlier of ten is above p90
		{ms(5, 1, 1000, 2, 3, 4, 6, 7, 8, 9), 99, 1000 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := Percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.samples, tc.p, got, tc.want)
		}
	}
}

func TestPercentileRejectsBadP(t *testing.T) {
	for _, p := range []float64{0, -1, 101, math.NaN()} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Percentile(_, %v) did not panic", p)
				}
			}()
			Percentile(ms(1), p)
		}()
	}
}

func TestSummarize(t *testing.T) {
	var samples []time.Duration
	for i := 1; i <= 1000; i++ {
		samples = append(samples, time.Duration(i)*time.Microsecond)
	}
	got := Summarize(samples)
	want := Latency{Count: 1000, Mean: 500500 * time.Nanosecond, P50: 500 * time.Microsecond,
		P90: 900 * time.Microsecond, P99: 990 * time.Microsecond, Max: 1000 * time.Microsecond}
	if got != want {
		t.Errorf("Summarize(1..1000us) = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Latency{}) {
		t.Errorf("Summarize(nil) is not zero")
	}
}

func TestRate(t *testing.T) {
	if got := Rate(1500, 3*time.Second); got != 500 {
		t.Errorf("Rate(1500, 3s) = %v, want 500", got)
	}
	if got := Rate(10, 250*time.Millisecond); got != 40 {
		t.Errorf("Rate(10, 250ms) = %v, want 40", got)
	}
	if got := Rate(10, 0); got != 0 {
		t.Errorf("Rate(10, 0) = %v, want 0", got)
	}
}

func TestRatioAndMedian(t *testing.T) {
	if got := Ratio(3, 2); got != 1.5 {
		t.Errorf("Ratio(3,2) = %v", got)
	}
	if got := Ratio(3, 0); !math.IsNaN(got) {
		t.Errorf("Ratio(3,0) = %v, want NaN", got)
	}
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{9, 1, 5}, 5}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	// 100 observations: 50 <= 0.1, 40 in (0.1, 0.5], 9 in (0.5, 1], 1 above 2.
	h := []Bucket{{0.1, 50}, {0.5, 90}, {1, 99}, {2, 99}, {inf, 100}}
	cases := []struct {
		q, want float64
	}{
		{0.5, 0.1},   // rank 50: top of the first bucket
		{0.25, 0.05}, // rank 25: halfway through [0, 0.1]
		{0.7, 0.3},   // rank 70: halfway through (0.1, 0.5]
		{0.99, 1},    // rank 99: top of (0.5, 1]
		{0.995, 2},   // rank 99.5: in +Inf, reported as the highest finite bound
	}
	for _, tc := range cases {
		if got := HistogramQuantile(tc.q, h); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("HistogramQuantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := HistogramQuantile(0.99, []Bucket{{1, 0}, {inf, 0}}); !math.IsNaN(got) {
		t.Errorf("quantile of an empty histogram = %v, want NaN", got)
	}
}

func TestSubBuckets(t *testing.T) {
	before := []Bucket{{0.1, 10}, {1, 20}, {math.Inf(1), 20}}
	after := []Bucket{{0.1, 15}, {1, 40}, {math.Inf(1), 41}}
	got := SubBuckets(after, before)
	want := []Bucket{{0.1, 5}, {1, 20}, {math.Inf(1), 21}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("SubBuckets[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	// p99 of the window: rank 20.79 of 21 falls in +Inf -> 1.
	if q := HistogramQuantile(0.99, got); q != 1 {
		t.Errorf("p99 of the window = %v, want 1", q)
	}
}

func TestPerAndCSVFloat(t *testing.T) {
	if got := Per(3, 4); got != 0.75 {
		t.Errorf("Per(3, 4) = %v, want 0.75", got)
	}
	if got := Per(3, 0); !math.IsNaN(got) {
		t.Errorf("Per(3, 0) = %v, want NaN", got)
	}
	for v, want := range map[float64]string{0.75: "0.75", 1e6: "1000000", math.NaN(): ""} {
		if got := CSVFloat(v); got != want {
			t.Errorf("CSVFloat(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestSlope(t *testing.T) {
	if got := Slope([]float64{0, 1000, 2000}, []float64{0.1, 0.3, 0.5}); math.Abs(got-0.0002) > 1e-12 {
		t.Errorf("Slope = %g, want 0.0002", got)
	}
	if got := Slope([]float64{5}, []float64{1}); !math.IsNaN(got) {
		t.Errorf("Slope of one point = %g, want NaN", got)
	}
}

func TestCheckAscendingNamesTheFlag(t *testing.T) {
	cases := []struct {
		counts []int
		want   string
	}{
		{[]int{1000, 5000}, "<nil>"},
		{nil, "--x-nodes is empty: want ascending positive node counts, e.g. 1,2"},
		{[]int{5, 5}, "--x-nodes 5,5: want ascending positive node counts, e.g. 1,2"},
		{[]int{0, 3}, "--x-nodes 0,3: want ascending positive node counts, e.g. 1,2"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(CheckAscending("--x-nodes", "node counts", "1,2", c.counts)); got != c.want {
			t.Errorf("CheckAscending(%v) = %s, want %s", c.counts, got, c.want)
		}
	}
}

func TestCheckEachNamesTheFirstRefusedValue(t *testing.T) {
	positive := func(n int) bool { return n > 0 }
	for _, c := range []struct {
		values []int
		want   string
	}{
		{nil, "<nil>"},
		{[]int{1, 2}, "<nil>"},
		{[]int{1, 0, -1}, "--workers 0: want at least 1"},
	} {
		if got := fmt.Sprint(CheckEach("--workers", c.values, positive, "want at least 1")); got != c.want {
			t.Errorf("CheckEach(%v) = %s, want %s", c.values, got, c.want)
		}
	}
}
