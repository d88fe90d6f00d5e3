package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Progress is e2e.test's progress update (test/e2e/reporters/progress.go).
type Progress struct {
	Msg       string   `json:"msg"`
	Total     int      `json:"total"`
	Completed int      `json:"completed"`
	Skipped   int      `json:"skipped"`
	Failed    int      `json:"failed"`
	Failures  []string `json:"failures,omitempty"`
}

// Lines the worker prints and the runner reads from its log.
const (
	progressPrefix = "k1m-progress: "
	donePrefix     = "k1m-done: "
	bulletsPrefix  = "k1m-bullets: " // spec results ginkgo has printed to e2e.log so far
)

// Worker plays Sonobuoy's sidecar: it takes e2e.test's progress updates on
// listen and prints each as a log line, then, when go-runner writes the
// done file naming the results tarball, prints that and stays up so the
// runner can copy the tarball out.
func Worker(ctx context.Context, listen, resultsDir string, out io.Writer) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", listen, err)
	}
	srv := &http.Server{Handler: progressHandler(out), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	done := filepath.Join(resultsDir, "done")
	var bullets bulletCounter
	printed := 0
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if bullets.update(filepath.Join(resultsDir, "e2e.log")) == nil && bullets.n != printed {
			printed = bullets.n
			fmt.Fprintf(out, "%s%d\n", bulletsPrefix, printed)
		}
		data, err := os.ReadFile(done)
		if err != nil || len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		fmt.Fprintf(out, "%s%s\n", donePrefix, strings.TrimSpace(string(data)))
		<-ctx.Done()
		return nil
	}
}

// bulletCounter counts ginkgo's result bullets (one per spec that ran) in
// go-runner's e2e.log as the file grows. The container log cannot show
// them in time: ginkgo ends its line of bullets only when the run ends or a
// failure report starts, and a log line reaches the kubelet when it ends.
type bulletCounter struct {
	offset int64
	carry  []byte // an unfinished UTF-8 sequence the last read ended in
	n      int
}

func (c *bulletCounter) update(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(c.offset, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	c.offset += int64(len(data))
	data = append(c.carry, data...)
	cut := unfinishedRune(data)
	c.n += strings.Count(string(data[:cut]), "•")
	c.carry = append([]byte(nil), data[cut:]...)
	return nil
}

// unfinishedRune is where a UTF-8 sequence that data cuts short begins, or
// len(data).
func unfinishedRune(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if utf8.FullRune(data[i:]) {
				return len(data)
			}
			return i
		}
	}
	return len(data)
}

func progressHandler(out io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST progress updates here", http.StatusMethodNotAllowed)
			return
		}
		var p Progress
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p); err != nil {
			http.Error(w, "want e2e.test's progress JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		line, _ := json.Marshal(p)
		fmt.Fprintf(out, "%s%s\n", progressPrefix, line)
	})
}

// parseWorkerLine reads one worker log line: a progress update, the
// results tarball's path, or neither.
func parseWorkerLine(line string) (p *Progress, donePath string) {
	switch {
	case strings.HasPrefix(line, progressPrefix):
		var pr Progress
		if json.Unmarshal([]byte(strings.TrimPrefix(line, progressPrefix)), &pr) == nil {
			return &pr, ""
		}
	case strings.HasPrefix(line, donePrefix):
		return nil, strings.TrimSpace(strings.TrimPrefix(line, donePrefix))
	}
	return nil, ""
}

// parseBulletsLine reads the worker's count of ginkgo's bullets.
func parseBulletsLine(line string) (int, bool) {
	rest, ok := strings.CutPrefix(line, bulletsPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(rest))
	return n, err == nil
}
