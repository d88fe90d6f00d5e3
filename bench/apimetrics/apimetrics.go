// Package apimetrics reads kube-apiserver's /metrics: the request latency
// histogram of mutating calls (what the upstream API call latency SLO is
// about) and request counts.
package apimetrics

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/stats"
)

// MutatingVerbs are the verbs the SLO calls mutating.
var MutatingVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// Snapshot is one scrape.
type Snapshot map[string]*dto.MetricFamily

// Scrape reads /metrics.
func Scrape(ctx context.Context, client kubernetes.Interface) (Snapshot, error) {
	body, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver /metrics: %w", err)
	}
	return Parse(string(body))
}

// Parse parses the Prometheus text format.
func Parse(text string) (Snapshot, error) {
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return Snapshot(families), nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// MutatingLatency is the cumulative histogram of mutating request
// latencies (seconds), all resources summed; resource "" means every one.
func (s Snapshot) MutatingLatency(resource string) []stats.Bucket {
	f := s["apiserver_request_duration_seconds"]
	if f == nil {
		return nil
	}
	sums := map[float64]float64{}
	for _, m := range f.GetMetric() {
		if !MutatingVerbs[label(m, "verb")] || (resource != "" && label(m, "resource") != resource) {
			continue
		}
		h := m.GetHistogram()
		hasInf := false
		for _, b := range h.GetBucket() {
			sums[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			hasInf = hasInf || math.IsInf(b.GetUpperBound(), +1)
		}
		if !hasInf { // the exposition may leave the +Inf bucket implicit
			sums[math.Inf(1)] += float64(h.GetSampleCount())
		}
	}
	out := make([]stats.Bucket, 0, len(sums))
	for le, c := range sums {
		out = append(out, stats.Bucket{UpperBound: le, Count: c})
	}
	return out
}

// Requests is the count of requests with verb on resource (either "" for
// all), any subresource.
func (s Snapshot) Requests(verb, resource string) float64 {
	return s.requests(verb, resource, func(string) bool { return true })
}

// RequestsTo is the count of requests with verb on resource's subresource
// ("" for the resource itself).
func (s Snapshot) RequestsTo(verb, resource, subresource string) float64 {
	return s.requests(verb, resource, func(sub string) bool { return sub == subresource })
}

func (s Snapshot) requests(verb, resource string, subresource func(string) bool) float64 {
	f := s["apiserver_request_total"]
	if f == nil {
		return 0
	}
	var n float64
	for _, m := range f.GetMetric() {
		if (verb == "" || label(m, "verb") == verb) && (resource == "" || label(m, "resource") == resource) && subresource(label(m, "subresource")) {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// FormatSeconds prints a latency in ms, or "n/a" for NaN.
func FormatSeconds(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v*1000, 'f', 1, 64) + "ms"
}
