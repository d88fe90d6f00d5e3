package series

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodPatch = `Description: summary line
 What it does and why, with a figure: 100K writes/s.
 .
 Second paragraph.
Author: k1m developers <dev@k1m.dev>
Forwarded: no
 Reason on a continuation line.
Last-Update: 2026-11-22
Tests: pkg TestSomething
---
diff --git a/k8s.io/apiserver/pkg/x.go b/k8s.io/apiserver/pkg/x.go
--- a/k8s.io/apiserver/pkg/x.go
+++ b/k8s.io/apiserver/pkg/x.go
@@ -1 +1 @@
-a
+b
diff --git a/k8s.io/kubernetes/new.go b/k8s.io/kubernetes/new.go
new file mode 100644
--- /dev/null
+++ b/k8s.io/kubernetes/new.go
@@ -0,0 +1 @@
+c
`

func writeSeries(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadParsesHeaderAndFiles(t *testing.T) {
	dir := writeSeries(t, map[string]string{"series": "# comment\n0001-x.patch\n", "0001-x.patch": goodPatch})
	patches, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := patches[0]
	if got := p.Header["Description"]; got != "summary line\nWhat it does and why, with a figure: 100K writes/s.\n\nSecond paragraph." {
		t.Errorf("Description = %q", got)
	}
	if got := p.Header["Forwarded"]; got != "no\nReason on a continuation line." {
		t.Errorf("Forwarded = %q", got)
	}
	if got := strings.Join(p.Files, ","); got != "k8s.io/apiserver/pkg/x.go,k8s.io/kubernetes/new.go" {
		t.Errorf("Files = %s", got)
	}
	if !strings.HasPrefix(string(p.Diff), "diff --git") {
		t.Errorf("Diff starts with %.20q", p.Diff)
	}
	if errs := p.CheckHeader(); len(errs) != 0 {
		t.Errorf("CheckHeader: %v", errs)
	}
}

func TestCheckHeaderNamesWhatIsMissing(t *testing.T) {
	bad := strings.Replace(goodPatch, "Tests: pkg TestSomething\n", "", 1)
	bad = strings.Replace(bad, "Last-Update: 2026-11-22", "Last-Update: yesterday", 1)
	bad = strings.Replace(bad, " What it does and why, with a figure: 100K writes/s.\n .\n Second paragraph.\n", "", 1)
	dir := writeSeries(t, map[string]string{"series": "0001-x.patch\n", "0001-x.patch": bad})
	patches, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, e := range patches[0].CheckHeader() {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"Tests is missing", "Last-Update \"yesterday\" is not a date", "Description has only a summary line"} {
		if !strings.Contains(all, want) {
			t.Errorf("CheckHeader does not report %q:\n%s", want, all)
		}
	}
}

func TestLoadRefusesUnlistedAndDuplicatePatches(t *testing.T) {
	dir := writeSeries(t, map[string]string{"series": "0001-x.patch\n", "0001-x.patch": goodPatch, "0002-y.patch": goodPatch})
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "0002-y.patch is not listed") {
		t.Errorf("unlisted patch: %v", err)
	}
	dir = writeSeries(t, map[string]string{"series": "0001-x.patch\n0001-x.patch\n", "0001-x.patch": goodPatch})
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("duplicate: %v", err)
	}
	dir = writeSeries(t, map[string]string{"series": "0001-x.patch\n", "0001-x.patch": "Description: x\n"})
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "no diff found") {
		t.Errorf("header only: %v", err)
	}
}
