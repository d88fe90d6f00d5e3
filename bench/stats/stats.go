// Package stats computes the figures every benchmark reports: latency
// percentiles, rates and ratios. It is kept apart from the scenarios so its
// arithmetic is unit-tested on its own.
package stats

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of samples by the
// nearest-rank method: the smallest sample such that at least p% of the
// samples are less than or equal to it. This is what a latency SLO ("99% of
// calls within 1 s") means. samples need not be sorted; it is not modified.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	if p <= 0 || p > 100 || math.IsNaN(p) {
		panic(fmt.Sprintf("stats.Percentile: p = %v, want 0 < p <= 100", p))
	}
	sorted := append([]time.Duration(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[rank(len(sorted), p)]
}

// rank is the zero-based nearest rank of the p-th percentile of n samples.
func rank(n int, p float64) int {
	r := int(math.Ceil(p/100*float64(n))) - 1
	if r < 0 {
		r = 0
	}
	if r >= n {
		r = n - 1
	}
	return r
}

// Latency summarises a set of call latencies.
type Latency struct {
	Count         int
	Mean          time.Duration
	P50, P90, P99 time.Duration
	Max           time.Duration
}

// Summarize computes the Latency of samples.
func Summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	sorted := append([]time.Duration(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var sum time.Duration
	for _, s := range sorted {
		sum += s
	}
	n := len(sorted)
	return Latency{
		Count: n,
		Mean:  sum / time.Duration(n),
		P50:   sorted[rank(n, 50)],
		P90:   sorted[rank(n, 90)],
		P99:   sorted[rank(n, 99)],
		Max:   sorted[n-1],
	}
}

// Rate is events per second over elapsed; 0 when elapsed is not positive.
func Rate(events int64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(events) / elapsed.Seconds()
}

// Ratio is a/b, or NaN when b is 0 (a ratio against nothing is not a number
// and must not print as a speed-up).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// Median of values (mean of the two middle ones for an even count); 0 for none.
// Used to combine repeated rounds of one variant.
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Per is total divided by count, the cost of one event; NaN when there
// was none.
func Per(total float64, count int64) float64 {
	if count <= 0 {
		return math.NaN()
	}
	return total / float64(count)
}

// CSVFloat is v as the results' CSV files write numbers: shortest exact
// decimal, empty for NaN (a figure not measured).
func CSVFloat(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Slope is the least-squares slope of ys against xs (NaN for fewer than
// two distinct xs).
func Slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	den := n*sxx - sx*sx
	if len(xs) < 2 || den == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / den
}

// CheckEach checks the values a flag lists one by one and names the first
// that ok refuses: "FLAG VALUE: WANT".
func CheckEach(flag string, values []int, ok func(int) bool, want string) error {
	for _, v := range values {
		if !ok(v) {
			return fmt.Errorf("%s %d: %s", flag, v, want)
		}
	}
	return nil
}

// CheckAscending checks the counts a flag lists (a scenario's steps): at
// least one, each positive and larger than the one before. The error names
// the flag, what the counts are (e.g. "node counts") and an example.
func CheckAscending(flag, what, example string, counts []int) error {
	if len(counts) == 0 {
		return fmt.Errorf("%s is empty: want ascending positive %s, e.g. %s", flag, what, example)
	}
	for i, n := range counts {
		if n < 1 || (i > 0 && n <= counts[i-1]) {
			s := make([]string, len(counts))
			for k, c := range counts {
				s[k] = strconv.Itoa(c)
			}
			return fmt.Errorf("%s %s: want ascending positive %s, e.g. %s", flag, strings.Join(s, ","), what, example)
		}
	}
	return nil
}
