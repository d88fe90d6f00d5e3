package stats

import (
	"math"
	"sort"
)

// Bucket is one cumulative histogram bucket: Count observations <= UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// HistogramQuantile estimates the q-th quantile (0 < q < 1) of a cumulative
// histogram the way Prometheus's histogram_quantile does: find the bucket
// holding the rank and interpolate linearly inside it. It is how the
// apiserver's request latency histogram is turned into the SLO's p99. When
// the rank falls in the +Inf bucket it returns the highest finite bound (the
// estimate is then "at least" that). NaN when the histogram is empty.
func HistogramQuantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 || q <= 0 || q >= 1 {
		return math.NaN()
	}
	b := append([]Bucket(nil), buckets...)
	sort.Slice(b, func(i, j int) bool { return b[i].UpperBound < b[j].UpperBound })
	total := b[len(b)-1].Count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(b), func(i int) bool { return b[i].Count >= rank })
	if math.IsInf(b[i].UpperBound, +1) {
		if i == 0 {
			return math.NaN()
		}
		return b[i-1].UpperBound
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = b[i-1].UpperBound, b[i-1].Count
	}
	inBucket := b[i].Count - below
	if inBucket <= 0 {
		return b[i].UpperBound
	}
	return lower + (b[i].UpperBound-lower)*(rank-below)/inBucket
}

// SubBuckets is the histogram of the observations made between two
// scrapes of the same cumulative histogram (same bounds).
func SubBuckets(after, before []Bucket) []Bucket {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.UpperBound] = b.Count
	}
	out := make([]Bucket, len(after))
	for i, b := range after {
		out[i] = Bucket{UpperBound: b.UpperBound, Count: b.Count - prev[b.UpperBound]}
	}
	return out
}
