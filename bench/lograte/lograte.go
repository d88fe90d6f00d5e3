// Package lograte measures how fast a server's log grows, and from which
// source lines: a log that grows with the number of nodes costs CPU and
// disk in proportion to the cluster, and names the line to quiet.
package lograte

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Source is one origin of log lines and its rate.
type Source struct {
	Source    string  // file:line of a klog line, "etcd FILE:LINE", or the k1m prefix
	PerSecond float64 // lines a second over the window
}

// Window is a log's growth over a stretch of time.
type Window struct {
	Duration  time.Duration
	PerSecond float64  // every line
	Top       []Source // the busiest sources, busiest first
}

// Offset is where a log ends now: a window counts the lines after it.
func Offset(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// Since counts the lines written to path after offset, over took, and
// keeps the top busiest sources.
func Since(path string, offset int64, took time.Duration, top int) (Window, error) {
	f, err := os.Open(path)
	if err != nil {
		return Window{}, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return Window{}, err
	}
	counts, err := Count(f)
	if err != nil {
		return Window{}, fmt.Errorf("reading %s: %w", path, err)
	}
	return Rates(counts, took, top), nil
}

// Count counts r's lines by source.
func Count(r io.Reader) (map[string]int, error) {
	counts := map[string]int{}
	s := bufio.NewScanner(r)
	s.Buffer(nil, 4<<20)
	for s.Scan() {
		counts[SourceOf(s.Text())]++
	}
	return counts, s.Err()
}

// Rates turns counts over took into lines a second, the top busiest
// first (ties by name).
func Rates(counts map[string]int, took time.Duration, top int) Window {
	w := Window{Duration: took}
	secs := took.Seconds()
	if secs <= 0 {
		return w
	}
	var all []Source
	total := 0
	for src, n := range counts {
		total += n
		all = append(all, Source{src, float64(n) / secs})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].PerSecond != all[j].PerSecond {
			return all[i].PerSecond > all[j].PerSecond
		}
		return all[i].Source < all[j].Source
	})
	w.PerSecond = float64(total) / secs
	w.Top = all[:min(top, len(all))]
	return w
}

// klogHeader is klog's line header: severity, date, time, thread, then
// the file and line.
var klogHeader = regexp.MustCompile(`^[IWEF]\d{4} [\d:.]+\s+\d+ ([^\]]+:\d+)\] `)

// SourceOf names where a line comes from: klog's file:line, etcd's caller
// (its lines are JSON), the k1m prefix of k1m's own lines, else
// "continuation" for a line inside a multi-line message.
func SourceOf(line string) string {
	if m := klogHeader.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	if strings.HasPrefix(line, "{") {
		var entry struct{ Caller string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Caller != "" {
			return "etcd " + entry.Caller
		}
	}
	for _, prefix := range []string{"k1m server:", "k1m agent:"} {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSuffix(prefix, ":")
		}
	}
	return "continuation"
}
