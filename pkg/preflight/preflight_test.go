package preflight

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPortFreeNamesTheFlag(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	err = PortFree("--https-listen-port", "::1", port)
	if err == nil || !strings.Contains(err.Error(), "--https-listen-port") {
		t.Fatalf("want an error naming --https-listen-port, got %v", err)
	}
	l.Close()
	if err := PortFree("--https-listen-port", "::1", port); err != nil {
		t.Fatalf("free port refused: %v", err)
	}
}

func TestWritable(t *testing.T) {
	dir := t.TempDir()
	if err := Writable("--data-dir", filepath.Join(dir, "new")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A path under a regular file can never be created, even by root.
	err := Writable("--data-dir", filepath.Join(file, "sub"))
	if err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("want an error naming --data-dir, got %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "new")); len(entries) != 0 {
		t.Fatalf("the check left files behind: %v", entries)
	}
}
