package lograte

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSourceOf(t *testing.T) {
	for line, want := range map[string]string{
		`I1128 03:19:07.307731   15057 range_allocator.go:247] "Successfully synced" key="n1"`:               "range_allocator.go:247",
		`E1128 03:18:54.338084   14685 kuberuntime_sandbox.go:305] "Failed to list pod sandboxes"`:           "kuberuntime_sandbox.go:305",
		`{"level":"warn","ts":"2026-11-28T03:18:56.074053Z","caller":"embed/serve.go:212","msg":"stopping"}`: "etcd embed/serve.go:212",
		`k1m server: applying manifests (node RBAC)`:                                                         "k1m server",
		`k1m agent: phase kubelet`:                  "k1m agent",
		`	, Header: map[Content-Type:[text/plain]]`: "continuation",
	} {
		if got := SourceOf(line); got != want {
			t.Errorf("SourceOf(%q) = %q, want %q", line, got, want)
		}
	}
}

// Only what is written after the offset counts; the busiest sources come
// first, ties by name.
func TestSinceCountsAfterTheOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.log")
	before := "I1128 03:00:00.000000   1 a.go:1] old\nI1128 03:00:00.000000   1 a.go:1] old\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	offset, err := Offset(path)
	if err != nil {
		t.Fatal(err)
	}
	after := strings.Repeat("I1128 03:00:01.000000   1 b.go:2] new\n", 6) + strings.Repeat("k1m server: step\n", 2) + strings.Repeat("I1128 03:00:01.000000   1 c.go:3] new\n", 2)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(after)
	f.Close()
	got, err := Since(path, offset, 2*time.Second, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := Window{Duration: 2 * time.Second, PerSecond: 5, Top: []Source{{"b.go:2", 3}, {"c.go:3", 1}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Since: %+v, want %+v", got, want)
	}
}
