// Package series reads k1m's patch series: patches/series lists the patch
// files in the order they apply; each patch is a DEP-3 style header followed
// by a unified diff whose paths start with the Go module path
// (a/k8s.io/apiserver/pkg/features/kube_features.go).
package series

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Patch is one file of the series.
type Patch struct {
	Name   string            // file name, e.g. 0001-watch-cache-hashmap.patch
	Path   string            // path on disk
	Header map[string]string // DEP-3 fields; continuation lines joined with "\n"
	Raw    []byte            // the header as written, without the "---" line
	Files  []string          // paths the diff touches, without the a/ b/ prefix
	Diff   []byte            // the diff part, from the first "diff --git" or "---" line
}

// Load reads dir/series and every patch it lists.
func Load(dir string) ([]Patch, error) {
	listPath := filepath.Join(dir, "series")
	list, err := os.ReadFile(listPath)
	if err != nil {
		return nil, fmt.Errorf("reading the series: %w (patches/series lists the patch files in order)", err)
	}
	var patches []Patch
	seen := map[string]bool{}
	for n, line := range strings.Split(string(list), "\n") {
		name := strings.TrimSpace(line)
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("%s:%d: %s is listed twice", listPath, n+1, name)
		}
		seen[name] = true
		p, err := ReadPatch(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", listPath, n+1, err)
		}
		patches = append(patches, p)
	}
	if err := checkUnlisted(dir, seen); err != nil {
		return nil, err
	}
	return patches, nil
}

// checkUnlisted refuses patch files that the series does not list: a patch
// someone forgot to list would silently not be applied.
func checkUnlisted(dir string, listed map[string]bool) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			return fmt.Errorf("%s is not listed in %s: add it in the order it applies, or delete it", f, filepath.Join(dir, "series"))
		}
	}
	return nil
}

var (
	fieldRE    = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$`)
	diffPathRE = regexp.MustCompile(`^(?:---|\+\+\+) (?:[ab]/)?(\S+)`)
)

// ReadPatch reads one patch file and splits it into header and diff.
func ReadPatch(path string) (Patch, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Patch{}, err
	}
	p := Patch{Name: filepath.Base(path), Path: path, Header: map[string]string{}}
	start := diffStart(data)
	if start < 0 {
		return Patch{}, fmt.Errorf("%s: no diff found (expected a 'diff --git' or '--- a/...' line after the header)", p.Name)
	}
	if err := parseHeader(p.Header, data[:start]); err != nil {
		return Patch{}, fmt.Errorf("%s: %w", p.Name, err)
	}
	p.Raw = bytes.TrimSuffix(bytes.TrimRight(data[:start], "\n"), []byte("\n---"))
	p.Diff = data[start:]
	p.Files = touchedFiles(p.Diff)
	return p, nil
}

func diffStart(data []byte) int {
	offset := 0
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("diff --git ")) || bytes.HasPrefix(line, []byte("--- ")) {
			return offset
		}
		offset += len(line)
	}
	return -1
}

// parseHeader reads RFC 822 style fields; a line starting with a space
// continues the previous field, a line " ." is an empty line in it.
func parseHeader(h map[string]string, data []byte) error {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "" || line == "---":
			last = ""
		case (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && last != "":
			text := strings.TrimSpace(line)
			if text == "." {
				text = ""
			}
			h[last] += "\n" + text
		default:
			m := fieldRE.FindStringSubmatch(line)
			if m == nil {
				return fmt.Errorf("header line %q is neither 'Field: value' nor an indented continuation", line)
			}
			if _, dup := h[m[1]]; dup {
				return fmt.Errorf("header field %s is given twice", m[1])
			}
			h[m[1]] = strings.TrimSpace(m[2])
			last = m[1]
		}
	}
	return sc.Err()
}

func touchedFiles(diff []byte) []string {
	set := map[string]bool{}
	for _, line := range strings.Split(string(diff), "\n") {
		if m := diffPathRE.FindStringSubmatch(line); m != nil && m[1] != "/dev/null" {
			set[m[1]] = true
		}
	}
	files := make([]string, 0, len(set))
	for f := range set {
		files = append(files, f)
	}
	sort.Strings(files)
	return files
}

// RequiredFields are the header fields every k1m patch carries:
// Description (a summary line, then what and why, with the figures),
// Author, Forwarded (the upstream status: "no" with the reason, "not-needed",
// or a link), Last-Update (YYYY-MM-DD) and Tests (the tests that fail
// without the patch).
var RequiredFields = []string{"Description", "Author", "Forwarded", "Last-Update", "Tests"}

// CheckHeader reports what is missing or malformed in a patch's header.
func (p Patch) CheckHeader() []error {
	var errs []error
	for _, f := range RequiredFields {
		if strings.TrimSpace(p.Header[f]) == "" {
			errs = append(errs, fmt.Errorf("%s: header field %s is missing or empty", p.Name, f))
		}
	}
	if d := p.Header["Description"]; d != "" && !strings.Contains(d, "\n") {
		errs = append(errs, fmt.Errorf("%s: Description has only a summary line: add indented lines that say what the patch does and why, with the figures", p.Name))
	}
	if lu := p.Header["Last-Update"]; lu != "" {
		if _, err := time.Parse("2006-01-02", lu); err != nil {
			errs = append(errs, fmt.Errorf("%s: Last-Update %q is not a date of the form YYYY-MM-DD", p.Name, lu))
		}
	}
	if len(p.Files) == 0 {
		errs = append(errs, fmt.Errorf("%s: the diff touches no file", p.Name))
	}
	return errs
}
