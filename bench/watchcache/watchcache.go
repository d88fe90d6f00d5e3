// Package watchcache runs patch 0007's BenchmarkK1mWatchCacheStore (the
// hashmap and B-tree watch cache stores side by side) in the patched tree
// and parses its results.
package watchcache

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Package and benchmark patch 0007 adds.
const (
	Package   = "k8s.io/apiserver/pkg/storage/cacher"
	Benchmark = "BenchmarkK1mWatchCacheStore"
)

// Result is one benchmark line.
type Result struct {
	Store       string // hashmap | btree
	Objects     int
	Op          string
	Iterations  int
	NsPerOp     float64
	BytesPerOp  float64
	AllocsPerOp float64
}

var line = regexp.MustCompile(`^` + Benchmark + `/store=(\w+)/objects=(\d+)/op=(\w+)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op)?(?:\s+([\d.]+) allocs/op)?`)

// Parse reads `go test -bench` output and returns the benchmark lines.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		objects, _ := strconv.Atoi(m[2])
		iters, _ := strconv.Atoi(m[4])
		ns, err := strconv.ParseFloat(m[5], 64)
		if err != nil {
			return nil, fmt.Errorf("benchmark line %q: %w", sc.Text(), err)
		}
		r := Result{Store: m[1], Objects: objects, Op: m[3], Iterations: iters, NsPerOp: ns}
		r.BytesPerOp, _ = strconv.ParseFloat(m[6], 64)
		r.AllocsPerOp, _ = strconv.ParseFloat(m[7], 64)
		out = append(out, r)
	}
	return out, sc.Err()
}

// Run runs the benchmark through k1m-build (the patched tree) and tees
// its output to log.
func Run(ctx context.Context, buildOut, benchtime string, count int, log io.Writer) ([]Result, error) {
	args := []string{"run", "./build/cmd/k1m-build", "go", "--flavor", "k1m", "--out", buildOut,
		"test", "-run", "^$", "-bench", "^" + Benchmark + "$", "-benchtime", benchtime, "-count", strconv.Itoa(count), "-timeout", "60m", Package}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stderr = os.Stderr
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	results, perr := Parse(io.TeeReader(pr, log))
	io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		return nil, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	if perr != nil {
		return nil, perr
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("%s printed no results: is patch 0007 in patches/series?", Benchmark)
	}
	return results, nil
}
