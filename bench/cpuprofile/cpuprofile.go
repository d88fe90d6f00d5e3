// Package cpuprofile captures CPU profiles of the control plane's processes
// while a benchmark window is open and breaks each one down into the costs
// docs/performance.md names: TLS and HTTP/2, authentication, authorization,
// priority-and-fairness, decoding and encoding, admission, managed fields,
// validation, the etcd client, etcd itself, the watch cache, GC, and the
// in-process kubelet and controllers.
package cpuprofile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// Capture fetches a CPU profile of window from url (a /debug/pprof/profile
// endpoint; the client carries the credentials) and writes it to path.
func Capture(ctx context.Context, client *http.Client, url string, window time.Duration, path string) error {
	secs := int(window.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?seconds=%d", url, secs), nil)
	if err != nil {
		return err
	}
	c := *client
	c.Timeout = window + time.Minute
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile from %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("CPU profile from %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("CPU profile from %s: %w", url, err)
	}
	return f.Close()
}

// Share is one category's part of a profile.
type Share struct {
	Category string
	CPU      time.Duration // sampled CPU time
	Fraction float64       // of the profile's total
}

// Breakdown reads a CPU profile and returns its categories, largest
// first (every category of Categories, zero ones included, then Other).
func Breakdown(path string) ([]Share, time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return breakdown(p)
}

func breakdown(p *profile.Profile) ([]Share, time.Duration, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, 0, fmt.Errorf("not a CPU profile: no cpu/nanoseconds sample type")
	}
	byCat := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[idx]
		total += v
		byCat[Classify(stack(s))] += v
	}
	out := make([]Share, 0, len(Categories)+1)
	for _, c := range append(Names(), Other) {
		out = append(out, Share{Category: c, CPU: time.Duration(byCat[c])})
	}
	for i := range out {
		if total > 0 {
			out[i].Fraction = float64(out[i].CPU) / float64(total)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CPU > out[j].CPU })
	return out, time.Duration(total), nil
}

// stack is the sample's function names, leaf first.
func stack(s *profile.Sample) []string {
	var fns []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil {
				fns = append(fns, l.Function.Name)
			}
		}
	}
	return fns
}
