package tool

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sync"
)

// failureRecap passes `go test -v` output through and remembers, for each
// test, the lines that say why it failed (its own file:line messages and
// their further lines), so that the failed tests' messages can be printed
// again at the end: a long cluster test's messages otherwise scroll away
// under its teardown and the tests that run after it, and CI shows only a
// part of the output.
//
// A message belongs to the test go test last named in an === RUN, CONT or
// NAME line (-v names the test whenever its output switches tests).
type failureRecap struct {
	out io.Writer

	mu       sync.Mutex
	partial  []byte              // the current line, until its newline
	current  string              // the test whose output this is
	inMsg    bool                // the last line was a message kept, or its continuation
	order    []string            // tests in the order they first ran
	messages map[string][]string // by test: its newest recapLines messages
	failed   map[string]bool     // tests go test reported --- FAIL
}

// recapLines bounds what is kept of each test: its newest messages are
// the ones that matter, and a test that logs in a loop must not fill the
// memory or push another test's messages out.
const recapLines = 40

var (
	// testMessage is a line written by t.Log/t.Error: indented, then
	// file.go:line:.
	testMessage = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)
	// continuation is a further line of a message of several lines,
	// which go test indents deeper.
	continuation = regexp.MustCompile(`^ {8}`)
	// testNamed starts a test's output in -v mode.
	testNamed = regexp.MustCompile(`^=== (?:RUN|CONT|NAME)\s+(\S+)$`)
	// testFailed is go test's verdict on a failed test.
	testFailed = regexp.MustCompile(`^\s*--- FAIL: (\S+) \(`)
)

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
	if r.messages == nil {
		r.messages, r.failed = map[string][]string{}, map[string]bool{}
	}
	if m := testNamed.FindStringSubmatch(line); m != nil {
		r.current, r.inMsg = m[1], false
		if _, seen := r.messages[r.current]; !seen {
			r.order = append(r.order, r.current)
			r.messages[r.current] = nil
		}
		return
	}
	if m := testFailed.FindStringSubmatch(line); m != nil {
		r.failed[m[1]], r.inMsg = true, false
		return
	}
	message := testMessage.MatchString(line) || r.inMsg && continuation.MatchString(line)
	r.inMsg = message && r.current != ""
	if !r.inMsg {
		return
	}
	kept := append(r.messages[r.current], line)
	if len(kept) > recapLines {
		kept = kept[len(kept)-recapLines:]
	}
	r.messages[r.current] = kept
}

// print writes each failed test's messages, in the order the tests ran,
// under a heading, to w.
func (r *failureRecap) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failed) == 0 {
		return
	}
	fmt.Fprintf(w, "k1m-build: go test failed; the failed tests' messages again (the newest %d lines of each):\n", recapLines)
	for _, test := range r.order {
		if !r.failed[test] {
			continue
		}
		fmt.Fprintf(w, "--- FAIL: %s\n", test)
		for _, l := range r.messages[test] {
			fmt.Fprintln(w, l)
		}
	}
}
