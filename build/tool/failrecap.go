package tool

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sync"
)

// failureRecap passes `go test -v` output through and remembers the lines
// that say why a test failed (the --- FAIL lines and the tests' own
// file:line messages), so that they can be printed again at the end: a
// long cluster test's messages otherwise scroll away under its teardown,
// and CI shows only the output's tail.
type failureRecap struct {
	out io.Writer

	mu      sync.Mutex
	partial []byte   // the current line, until its newline
	lines   []string // the newest recapLines lines kept
}

// recapLines bounds what is kept: the newest messages are the ones that
// matter, and a test that logs in a loop must not fill the memory.
const recapLines = 120

// testMessage is a line written by t.Log/t.Error (indented, then
// file.go:line:) or go test's verdict on a test.
var testMessage = regexp.MustCompile(`^\s*(--- FAIL: |[\w.-]+\.go:\d+: )`)

func (r *failureRecap) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		r.keep(string(r.partial[:i]))
		r.partial = r.partial[i+1:]
	}
	r.mu.Unlock()
	return r.out.Write(p)
}

func (r *failureRecap) keep(line string) {
	if !testMessage.MatchString(line) {
		return
	}
	r.lines = append(r.lines, line)
	if len(r.lines) > recapLines {
		r.lines = r.lines[len(r.lines)-recapLines:]
	}
}

// print writes the lines kept, under a heading, to w.
func (r *failureRecap) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == 0 {
		return
	}
	fmt.Fprintf(w, "k1m-build: go test failed; the tests' messages and failures again (the newest %d lines at most):\n", recapLines)
	for _, l := range r.lines {
		fmt.Fprintln(w, l)
	}
}
