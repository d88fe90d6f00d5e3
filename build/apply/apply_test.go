package apply

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k1m.dev/k1m/build/series"
)

// fakeModule writes a pristine module with one file.
func fakeModule(t *testing.T, content string) Module {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greet.go"), []byte(content), 0o444); err != nil {
		t.Fatal(err)
	}
	return Module{Path: "example.com/greet", Version: "v1.0.0", Dir: dir}
}

func patchOf(name, diff string) series.Patch {
	return series.Patch{Name: name, Diff: []byte(diff), Files: []string{"example.com/greet/greet.go"}}
}

const pristine = "package greet\n\nfunc Hello() string {\n\treturn \"hello\"\n}\n"

const goodDiff = `--- a/example.com/greet/greet.go
+++ b/example.com/greet/greet.go
@@ -1,5 +1,5 @@
 package greet
 
 func Hello() string {
-	return "hello"
+	return "hello, k1m"
 }
`

// Context that does not match the pristine file: must fail, not fuzz.
const staleDiff = `--- a/example.com/greet/greet.go
+++ b/example.com/greet/greet.go
@@ -1,5 +1,5 @@
 package greet
 
 func Hi() string {
-	return "hello"
+	return "hi"
 }
`

func readGreet(t *testing.T, src string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(src, "example.com/greet/greet.go"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestBuildTreeAppliesAndReuses(t *testing.T) {
	mod := fakeModule(t, pristine)
	src := filepath.Join(t.TempDir(), "src")
	patches := []series.Patch{patchOf("0001-greet.patch", goodDiff)}
	reused, err := BuildTree(src, []Module{mod}, patches, io.Discard)
	if err != nil || reused {
		t.Fatalf("BuildTree: reused=%v err=%v", reused, err)
	}
	if got := readGreet(t, src); !strings.Contains(got, `"hello, k1m"`) {
		t.Fatalf("patch not applied:\n%s", got)
	}
	if reused, err := BuildTree(src, []Module{mod}, patches, io.Discard); err != nil || !reused {
		t.Fatalf("second BuildTree with nothing changed: reused=%v err=%v, want reused", reused, err)
	}
}

func TestBuildTreeFailedPatchLeavesTreeUntouched(t *testing.T) {
	mod := fakeModule(t, pristine)
	src := filepath.Join(t.TempDir(), "src")
	good := []series.Patch{patchOf("0001-greet.patch", goodDiff)}
	if _, err := BuildTree(src, []Module{mod}, good, io.Discard); err != nil {
		t.Fatal(err)
	}
	bad := append(good, patchOf("0002-stale.patch", staleDiff))
	_, err := BuildTree(src, []Module{mod}, bad, io.Discard)
	var applyErr *ApplyError
	if !errors.As(err, &applyErr) {
		t.Fatalf("BuildTree with a stale patch: %v, want an ApplyError", err)
	}
	msg := err.Error()
	for _, want := range []string{"0002-stale.patch", "example.com/greet/greet.go", "Hunk #1 FAILED"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q:\n%s", want, msg)
		}
	}
	if got := readGreet(t, src); !strings.Contains(got, `"hello, k1m"`) || strings.Contains(got, `"hi"`) {
		t.Errorf("the previous tree changed after a failed apply:\n%s", got)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(src), "src.new-*"))
	if len(leftovers) > 0 {
		t.Errorf("half-patched trees left behind: %v", leftovers)
	}
}

func TestModuleOfLongestPrefix(t *testing.T) {
	mods := []Module{{Path: "k8s.io/kube"}, {Path: "k8s.io/kubernetes"}, {Path: "k8s.io/kubelet"}}
	m, err := ModuleOf(mods, "k8s.io/kubelet/config/v1beta1/types.go")
	if err != nil || m.Path != "k8s.io/kubelet" {
		t.Fatalf("ModuleOf: %v %v, want k8s.io/kubelet", m.Path, err)
	}
	if _, err := ModuleOf(mods, "example.com/x/y.go"); err == nil {
		t.Fatal("ModuleOf found a module for a path in none")
	}
}

func TestWriteWorkspace(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "_output")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteWorkspace(root, out, []Module{{Path: "k8s.io/apiserver"}}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(out, "go.work"))
	for _, want := range []string{"use ..\n", "replace k8s.io/apiserver => ./src/k8s.io/apiserver\n", "godebug default=go1.23"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("go.work lacks %q:\n%s", want, data)
		}
	}
}
