package docscheck

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const repo = "../.."

// referencePages are the README and docs/*.md; dated records live in
// docs' subdirectories.
func referencePages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in %s/docs: %v", repo, err)
	}
	return append([]string{filepath.Join(repo, "README.md")}, pages...)
}

// allPages are every Markdown file of the project's docs and README.
func allPages(t *testing.T) []string {
	t.Helper()
	pages := []string{filepath.Join(repo, "README.md")}
	err := filepath.WalkDir(filepath.Join(repo, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".md" {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

func anchorCache() func(string) (map[string]bool, error) {
	cache := map[string]map[string]bool{}
	return func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		p, err := Read(path)
		if err != nil {
			return nil, err
		}
		cache[path] = p.Anchors()
		return cache[path], nil
	}
}

func TestDocsLinksResolve(t *testing.T) {
	anchors := anchorCache()
	for _, path := range allPages(t) {
		p, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range p.Links(anchors) {
			t.Error(problem)
		}
	}
}

func TestReferencePagesHaveNoDates(t *testing.T) {
	for _, path := range referencePages(t) {
		p, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range p.Dates() {
			t.Error(problem)
		}
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Scale-out: 1, 2, 3 API servers": "scale-out-1-2-3-api-servers",
		"NetworkPolicy (`pkg/netpol`)":   "networkpolicy-pkgnetpol",
		"CoreDNS's replicas":             "corednss-replicas",
		"Addresses: IPv6-only":           "addresses-ipv6-only",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestChecksFindWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("other.md", "# Other\n\n## A heading\n\n## A heading\n")
	page := write("page.md", "# Page\n\n"+
		"[ok](other.md#a-heading) [second](other.md#a-heading-1) [self](#page)\n"+
		"[gone](missing.md) [no heading](other.md#nope) [web](https://example.com/x#y)\n"+
		"`[code](not-a-link.md)` and [a run](records/2026-11-25-run/) measured on 2026-11-24.\n"+
		"```\n[fenced](nothing.md) 2026-01-01\n```\n")
	p, err := Read(page)
	if err != nil {
		t.Fatal(err)
	}
	got := p.Links(anchorCache())
	want := []Problem{
		{page + ":4", "link missing.md: no such file"},
		{page + ":4", "link other.md#nope: other.md has no heading #nope"},
		{page + ":5", "link records/2026-11-25-run/: no such file"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Links:\n got %v\nwant %v", got, want)
	}
	wantDates := []Problem{{page + ":5", "a date (2026-11-24) on a reference page: say what is true now, and link the dated record"}}
	if got := p.Dates(); !reflect.DeepEqual(got, wantDates) {
		t.Errorf("Dates:\n got %v\nwant %v", got, wantDates)
	}
}
