package localcluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWrittenSinceRefusesAPreviousStartsFile(t *testing.T) {
	dir := t.TempDir()
	token, pid := filepath.Join(dir, "token"), filepath.Join(dir, "server.pid")
	write := func(path, data string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now().Add(-time.Minute)
	write(pid, "42\n", start)
	cases := []struct {
		name  string
		data  string
		at    time.Time
		wants bool
	}{
		{"written before the start", "K10::server:x\n", start.Add(-time.Second), false},
		{"written at the start", "K10::server:x\n", start, true},
		{"written after the start", "K10::server:x\n", start.Add(time.Second), true},
		{"empty", "", start.Add(time.Second), false},
	}
	for _, c := range cases {
		write(token, c.data, c.at)
		if got := writtenSince(token, pid); got != c.wants {
			t.Errorf("%s: writtenSince = %v, want %v", c.name, got, c.wants)
		}
	}
	if writtenSince(filepath.Join(dir, "missing"), pid) || writtenSince(token, filepath.Join(dir, "no.pid")) {
		t.Error("a missing file or pid file counts as written")
	}
}
