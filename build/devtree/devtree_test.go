package devtree

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k1m.dev/k1m/build/apply"
	"k1m.dev/k1m/build/series"
)

const patchText = `Description: greet k1m
 What and why.
Author: k1m developers <dev@k1m.dev>
Forwarded: no
Last-Update: 2026-11-22
Tests: TestGreet
---
diff --git a/example.com/greet/greet.go b/example.com/greet/greet.go
index 1111111..2222222 100644
--- a/example.com/greet/greet.go
+++ b/example.com/greet/greet.go
@@ -1,3 +1,3 @@
 package greet
 
-const Greeting = "hello"
+const Greeting = "hello, k1m"
`

func setup(t *testing.T, pristine string) (apply.Module, []series.Patch, string) {
	t.Helper()
	modDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(modDir, "greet.go"), []byte(pristine), 0o444); err != nil {
		t.Fatal(err)
	}
	patchDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(patchDir, "0001-greet.patch"), []byte(patchText), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(patchDir, "series"), []byte("0001-greet.patch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	patches, err := series.Load(patchDir)
	if err != nil {
		t.Fatal(err)
	}
	return apply.Module{Path: "example.com/greet", Version: "v1.0.0", Dir: modDir}, patches, patchDir
}

func TestCreateExportRoundTrip(t *testing.T) {
	mod, patches, _ := setup(t, "package greet\n\nconst Greeting = \"hello\"\n")
	dir := filepath.Join(t.TempDir(), "dt")
	if err := Create(dir, []apply.Module{mod}, patches, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	names, err := Export(dir, out)
	if err != nil || len(names) != 1 {
		t.Fatalf("Export: %v %v", names, err)
	}
	got, _ := os.ReadFile(filepath.Join(out, "0001-greet.patch"))
	// git abbreviates blob hashes differently; compare without index lines.
	strip := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(l, "index ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if strip(string(got)) != strip(patchText) {
		t.Errorf("exported patch differs:\n%s\nwant:\n%s", got, patchText)
	}
}

func TestCreateStopsAtAPatchThatDoesNotApplyAndContinues(t *testing.T) {
	mod, patches, _ := setup(t, "package greet\n\nconst Greeting = \"hi\"\n")
	dir := filepath.Join(t.TempDir(), "dt")
	err := Create(dir, []apply.Module{mod}, patches, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "0001-greet.patch does not apply") || !strings.Contains(err.Error(), "--continue") {
		t.Fatalf("Create with a stale patch: %v", err)
	}
	// The developer fixes the file by hand and continues.
	os.Remove(filepath.Join(dir, "example.com/greet/greet.go.rej"))
	fixed := "package greet\n\nconst Greeting = \"hi, k1m\"\n"
	if err := os.WriteFile(filepath.Join(dir, "example.com/greet/greet.go"), []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Continue(dir, patches, io.Discard); err != nil {
		t.Fatal(err)
	}
	names, err := Export(dir, t.TempDir())
	if err != nil || len(names) != 1 || names[0] != "0001-greet.patch" {
		t.Fatalf("Export after the fix: %v %v", names, err)
	}
}
