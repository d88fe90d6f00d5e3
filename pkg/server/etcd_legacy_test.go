package server

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k1m.dev/k1m/pkg/config"
)

// An earlier release's DATA-DIR/etcd-ephemeral goes (its data would be
// discarded anyway); the same path given as --no-fsync-data-dir stays.
func TestRemoveLegacyNoFsyncDir(t *testing.T) {
	for _, c := range []struct {
		name, noFsyncDir string
		wantGone         bool
	}{
		{"default directory now etcd-nofsync", "etcd-nofsync", true},
		{"old directory given as the flag", "etcd-ephemeral", false},
		{"old directory given with a trailing slash", "etcd-ephemeral/", false},
		{"a directory inside the old one given", "etcd-ephemeral/tmpfs", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			old := filepath.Join(dir, "etcd-ephemeral", "member", "wal")
			if err := os.MkdirAll(old, 0o700); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			s := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir, NoFsyncDataDir: filepath.Join(dir, c.noFsyncDir)}}, out: &out}
			if err := s.removeLegacyNoFsyncDir(); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(filepath.Join(dir, "etcd-ephemeral"))
			if gone := os.IsNotExist(err); gone != c.wantGone {
				t.Fatalf("etcd-ephemeral gone: %v, want %v (log %q)", gone, c.wantGone, out.String())
			}
			if err := s.removeLegacyNoFsyncDir(); err != nil {
				t.Fatalf("second call: %v", err)
			}
		})
	}
}
