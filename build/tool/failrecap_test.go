package tool

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestFailureRecapKeepsMessagesAndVerdicts(t *testing.T) {
	var out, recap bytes.Buffer
	r := &failureRecap{out: &out}
	input := strings.Join([]string{
		"=== RUN   TestCluster",
		"cluster: k1m server started (pid 1)",
		"    clustercheck.go:171: a web pod running on each backend node: pod web-1 on k1m-node-1 is Pending",
		"W1125 06:55:34.589819   32677 logging.go:55] [core] grpc: dial refused",
		"--- FAIL: TestCluster (552.33s)",
		"    --- FAIL: TestCluster/PodsAcrossNodesServiceAndDNS (180.03s)",
		"    --- PASS: TestCluster/NodesReadyWithIPv6 (0.00s)",
		"",
	}, "\n")
	// Written in pieces that split lines, as a pipe delivers them.
	for _, piece := range []string{input[:40], input[40:130], input[130:]} {
		if _, err := r.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != input {
		t.Errorf("passed through %q, want the input unchanged", out.String())
	}
	r.print(&recap)
	want := "k1m-build: go test failed; the tests' messages and failures again (the newest 120 lines at most):\n" +
		"    clustercheck.go:171: a web pod running on each backend node: pod web-1 on k1m-node-1 is Pending\n" +
		"--- FAIL: TestCluster (552.33s)\n" +
		"    --- FAIL: TestCluster/PodsAcrossNodesServiceAndDNS (180.03s)\n"
	if recap.String() != want {
		t.Errorf("recap:\n%s\nwant:\n%s", recap.String(), want)
	}
}

func TestFailureRecapKeepsTheNewestLines(t *testing.T) {
	r := &failureRecap{out: &bytes.Buffer{}}
	for i := 0; i < recapLines+5; i++ {
		fmt.Fprintf(r, "    x_test.go:1: message %d\n", i)
	}
	if len(r.lines) != recapLines || r.lines[0] != "    x_test.go:1: message 5" {
		t.Errorf("kept %d lines from %q, want %d from message 5", len(r.lines), r.lines[0], recapLines)
	}
}
