// Package apimetrics reads kube-apiserver's /metrics: the request latency
// histogram of mutating calls (what the upstream API call latency SLO is
// about) and request counts.
package apimetrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/clock"
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
	return s.latencies(func(m *dto.Metric) (Call, bool) {
		return Call{}, MutatingVerbs[label(m, "verb")] && (resource == "" || label(m, "resource") == resource)
	})[Call{}]
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

// Call names what the SLOs are kept per: a verb on a resource (and
// subresource) at a scope.
type Call struct {
	Verb, Resource, Subresource, Scope string
}

// String is e.g. "PATCH nodes/status" or "LIST pods (namespace)".
func (c Call) String() string {
	s := c.Verb + " " + c.Resource
	if c.Subresource != "" {
		s += "/" + c.Subresource
	}
	if c.Verb == "LIST" {
		s += " (" + c.Scope + ")"
	}
	return s
}

// Latencies are the cumulative request latency histograms (seconds) of the
// calls whose verb is in verbs, one per Call.
func (s Snapshot) Latencies(verbs map[string]bool) map[Call][]stats.Bucket {
	return s.latencies(func(m *dto.Metric) (Call, bool) {
		return Call{Verb: label(m, "verb"), Resource: label(m, "resource"), Subresource: label(m, "subresource"), Scope: label(m, "scope")},
			verbs[label(m, "verb")]
	})
}

// latencies sums apiserver_request_duration_seconds's series into one
// histogram per key of the series pick keeps.
func (s Snapshot) latencies(pick func(*dto.Metric) (Call, bool)) map[Call][]stats.Bucket {
	if s["apiserver_request_duration_seconds"] == nil {
		return nil
	}
	return histogramsBy(s["apiserver_request_duration_seconds"], pick)
}

// histogramsBy sums family f's series into one cumulative histogram per
// key of the series pick keeps.
func histogramsBy[K comparable](f *dto.MetricFamily, pick func(*dto.Metric) (K, bool)) map[K][]stats.Bucket {
	sums := map[K]map[float64]float64{}
	for _, m := range f.GetMetric() {
		key, ok := pick(m)
		if !ok {
			continue
		}
		if sums[key] == nil {
			sums[key] = map[float64]float64{}
		}
		addHistogram(sums[key], m.GetHistogram())
	}
	out := map[K][]stats.Bucket{}
	for key, bounds := range sums {
		out[key] = buckets(bounds)
	}
	return out
}

// addHistogram adds h's cumulative counts to sums, by upper bound.
func addHistogram(sums map[float64]float64, h *dto.Histogram) {
	hasInf := false
	for _, b := range h.GetBucket() {
		sums[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		hasInf = hasInf || math.IsInf(b.GetUpperBound(), +1)
	}
	if !hasInf { // the exposition may leave the +Inf bucket implicit
		sums[math.Inf(1)] += float64(h.GetSampleCount())
	}
}

func buckets(sums map[float64]float64) []stats.Bucket {
	out := make([]stats.Bucket, 0, len(sums))
	for le, n := range sums {
		out = append(out, stats.Bucket{UpperBound: le, Count: n})
	}
	return out
}

// WatchEvents are the watch events kube-apiserver sent, per kind, and
// their bytes (apiserver_watch_events_total, apiserver_watch_events_sizes).
type WatchEvents struct {
	Events, Bytes map[string]float64
}

// WatchEvents reads the counters of the events sent to watchers.
func (s Snapshot) WatchEvents() WatchEvents {
	w := WatchEvents{Events: map[string]float64{}, Bytes: map[string]float64{}}
	for _, m := range s["apiserver_watch_events_total"].GetMetric() {
		w.Events[label(m, "kind")] += m.GetCounter().GetValue()
	}
	for _, m := range s["apiserver_watch_events_sizes"].GetMetric() {
		w.Bytes[label(m, "kind")] += m.GetHistogram().GetSampleSum()
	}
	return w
}

// Gauge is the value of an unlabelled gauge (e.g. go_memstats_heap_inuse_bytes),
// NaN when the family is absent.
func (s Snapshot) Gauge(name string) float64 {
	f := s[name]
	if f == nil || len(f.GetMetric()) == 0 {
		return math.NaN()
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// Histogram is the cumulative histogram of family name, every series
// summed (e.g. kube-proxy's kubeproxy_network_programming_duration_seconds).
func (s Snapshot) Histogram(name string) []stats.Bucket {
	sums := map[float64]float64{}
	for _, m := range s[name].GetMetric() {
		addHistogram(sums, m.GetHistogram())
	}
	return buckets(sums)
}

// HistogramSum is the sum of the observations of histogram family name,
// every series summed (0 when it is absent).
func (s Snapshot) HistogramSum(name string) float64 {
	total := 0.0
	for _, m := range s[name].GetMetric() {
		total += m.GetHistogram().GetSampleSum()
	}
	return total
}

// HistogramSumsWhere sums the observations of histogram family name's
// series whose labels hold every pair of where, per value of label by
// (e.g. apiserver_response_sizes of verb LIST per resource).
func (s Snapshot) HistogramSumsWhere(name, by string, where map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s[name].GetMetric() {
		matches := true
		for k, v := range where {
			matches = matches && label(m, k) == v
		}
		if matches {
			out[label(m, by)] += m.GetHistogram().GetSampleSum()
		}
	}
	return out
}

// Sum is the sum of family name's series (counters and gauges), 0 when
// it is absent.
func (s Snapshot) Sum(name string) float64 {
	total := 0.0
	for _, m := range s[name].GetMetric() {
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

// SumWhere sums family name's series (counters and gauges) whose labels
// hold every pair of where.
func (s Snapshot) SumWhere(name string, where map[string]string) float64 {
	total := 0.0
	for _, m := range s[name].GetMetric() {
		matches := true
		for k, v := range where {
			matches = matches && label(m, k) == v
		}
		if matches {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// HistogramsBy sums family name's series into one cumulative histogram
// per value of label by, e.g. the controller-manager's
// workqueue_queue_duration_seconds per queue "name".
func (s Snapshot) HistogramsBy(name, by string) map[string][]stats.Bucket {
	return histogramsBy(s[name], func(m *dto.Metric) (string, bool) { return label(m, by), true })
}

// SumsBy sums family name's series (counters and gauges) per value of
// label by.
func (s Snapshot) SumsBy(name, by string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s[name].GetMetric() {
		out[label(m, by)] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return out
}

// scrapeAttempts is how many times a component's /metrics is asked for
// when the request fails before an answer: the transport, cached by
// client-go across scrapes, may hand out a kept-alive connection the
// component has just closed ("use of closed network connection").
const scrapeAttempts = 3

// getRetried GETs url, again after a second when no answer came.
func getRetried(ctx context.Context, client *http.Client, url string) (*http.Response, error) {
	var err error
	for attempt := 1; attempt <= scrapeAttempts; attempt++ {
		var req *http.Request
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil); err != nil {
			return nil, err
		}
		var resp *http.Response
		if resp, err = client.Do(req); err == nil {
			return resp, nil
		}
		if attempt < scrapeAttempts {
			if werr := clock.Sleep(ctx, time.Second); werr != nil {
				return nil, werr
			}
		}
	}
	return nil, err
}

// ScrapeComponent reads the /metrics of a component serving on its own
// secure port on this host (kube-controller-manager at [::1]:10257), with
// cfg's client credentials. The component's serving certificate is its
// own self-signed one, so it is not verified: the bench reads its own
// machine's loopback.
func ScrapeComponent(ctx context.Context, cfg *rest.Config, hostPort string) (Snapshot, error) {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + hostPort
	c.TLSClientConfig.Insecure = true
	c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = "", nil
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	resp, err := getRetried(ctx, client, c.Host+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading %s/metrics: %w", c.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s/metrics: %w", c.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading %s/metrics: %s: %s", c.Host, resp.Status, strings.TrimSpace(string(body)))
	}
	return Parse(string(body))
}
