package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesAtomicallyWithMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "token")
	for _, content := range []string{"first", "second"} {
		if err := WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestCopyTreeGivesEachFileItsMode(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "tool"), []byte("#!/bin/sh\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("read me"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("README", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	modeOf := func(rel string) os.FileMode {
		if filepath.Dir(rel) == "bin" {
			return 0o755
		}
		return 0o644
	}
	if err := CopyTree(src, dst, modeOf); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]os.FileMode{"bin/tool": 0o755, "README": 0o644} {
		fi, err := os.Stat(filepath.Join(dst, rel))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v mode %v, want %v", rel, err, fi.Mode().Perm(), want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "link")); !os.IsNotExist(err) {
		t.Errorf("a symlink was copied: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dst, "README")); string(data) != "read me" {
		t.Errorf("README holds %q", data)
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/var/lib/k1m", "/var/lib/k1m", true},
		{"/var/lib/k1m/etcd", "/var/lib/k1m", true},
		{"/var/lib/k1m/..etcd", "/var/lib/k1m", true},
		{"/var/lib/k1m-other", "/var/lib/k1m", false},
		{"/var/lib", "/var/lib/k1m", false},
		{"/srv/etcd", "/var/lib/k1m", false},
		{"data/etcd", "data", true},
		{"etcd", "data", false},
		{"/abs", "relative", false},
	} {
		if got := Within(c.path, c.dir); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}

func TestExistsAndRemoveIfExists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if Exists(path) {
		t.Fatalf("%s exists before it is written", path)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !Exists(path) {
		t.Fatalf("%s written, Exists says no", path)
	}
	for i := 0; i < 2; i++ { // the second finds it gone
		if err := RemoveIfExists(path); err != nil {
			t.Fatalf("RemoveIfExists, time %d: %v", i+1, err)
		}
	}
	if Exists(path) {
		t.Errorf("%s still there", path)
	}
}
