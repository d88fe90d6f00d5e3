package tool

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestFailureRecapKeepsTheFailedTestsMessages(t *testing.T) {
	var out, recap bytes.Buffer
	r := &failureRecap{out: &out}
	input := strings.Join([]string{
		"=== RUN   TestCluster",
		"cluster: k1m server started (pid 1)",
		"=== RUN   TestCluster/PodsAcrossNodesServiceAndDNS",
		"    clustercheck.go:171: a web pod running on each backend node: pod web-1 on k1m-node-1 is Pending",
		"        the pod's events:",
		"        FailedScheduling: 0/3 nodes are available",
		"W1125 06:55:34.589819   32677 logging.go:55] [core] grpc: dial refused",
		"        indented output that is no message",
		"=== RUN   TestCluster/NodesReadyWithIPv6",
		"        indented output after a test's start, no message either",
		"    nodes.go:12: 3 nodes Ready",
		"=== NAME  TestCluster",
		"    cluster_test.go:173: --- last lines of server.log:",
		"=== RUN   TestOther",
		"    other_test.go:9: window 1: 10.04 watchers",
		"--- PASS: TestOther (1.00s)",
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
	want := "k1m-build: go test failed; the failed tests' messages again (the newest 40 lines of each):\n" +
		"--- FAIL: TestCluster\n" +
		"    cluster_test.go:173: --- last lines of server.log:\n" +
		"--- FAIL: TestCluster/PodsAcrossNodesServiceAndDNS\n" +
		"    clustercheck.go:171: a web pod running on each backend node: pod web-1 on k1m-node-1 is Pending\n" +
		"        the pod's events:\n" +
		"        FailedScheduling: 0/3 nodes are available\n"
	if recap.String() != want {
		t.Errorf("recap:\n%s\nwant:\n%s", recap.String(), want)
	}
}

func TestFailureRecapKeepsEachTestsNewestLines(t *testing.T) {
	r := &failureRecap{out: &bytes.Buffer{}}
	fmt.Fprintln(r, "=== RUN   TestX")
	for i := 0; i < recapLines+5; i++ {
		fmt.Fprintf(r, "    x_test.go:1: message %d\n", i)
	}
	fmt.Fprintln(r, "=== RUN   TestY")
	fmt.Fprintln(r, "    y_test.go:1: the failure")
	if got := r.messages["TestX"]; len(got) != recapLines || got[0] != "    x_test.go:1: message 5" {
		t.Errorf("kept %d lines of TestX from %q, want %d from message 5", len(got), got[0], recapLines)
	}
	if got := r.messages["TestY"]; len(got) != 1 {
		t.Errorf("TestY's messages: %q, want its one", got)
	}
}

func TestFailureRecapPrintsNothingWithoutAFailedTest(t *testing.T) {
	var recap bytes.Buffer
	r := &failureRecap{out: &bytes.Buffer{}}
	fmt.Fprintln(r, "# k1m.dev/k1m/pkg/x\npkg/x/x.go:3:1: syntax error")
	r.print(&recap)
	if recap.Len() != 0 {
		t.Errorf("recap of a build failure: %q, want nothing (its errors are the output's tail)", recap.String())
	}
}
