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
	"strings"
	"time"
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
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
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
