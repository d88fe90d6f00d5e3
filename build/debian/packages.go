package debian

import (
	_ "embed" // packages.env
	"fmt"
	"regexp"
	"strings"
)

// PackagesFile is packages.env: the Debian package lists k1m's nodes run
// with, the one place they are named. The shell sources it; this package
// reads it as the shell does.
//
//go:embed packages.env
var PackagesFile string

var lists, listOrder = mustParseLists(PackagesFile)

// Packages is the list name (e.g. RUNTIME_PACKAGES) of packages.env, a new
// slice each call. A name the file lacks is a bug in the caller: it panics.
func Packages(name string) []string {
	l, ok := lists[name]
	if !ok {
		panic(fmt.Sprintf("build/debian/packages.env has no list %s (it has %s)", name, strings.Join(listOrder, ", ")))
	}
	return append([]string(nil), l...)
}

// ListNames are the lists of packages.env, in file order.
func ListNames() []string { return append([]string(nil), listOrder...) }

var (
	listLine    = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)="([^"]*)"$`)
	packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	listRef     = regexp.MustCompile(`^\$([A-Z][A-Z0-9_]*)$`)
)

func mustParseLists(text string) (map[string][]string, []string) {
	l, order, err := ParseLists(text)
	if err != nil {
		panic("build/debian/packages.env: " + err.Error())
	}
	return l, order
}

// ParseLists reads packages.env's form: blank lines, # comments and
// NAME="word ...", where a word is a Debian package name or $NAME, a list
// defined above it, whose packages it stands for. Anything else (and a
// package named twice in one list) is an error, so the file means the same
// to Go as to the shell.
func ParseLists(text string) (map[string][]string, []string, error) {
	lists := map[string][]string{}
	var order []string
	for i, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := listLine.FindStringSubmatch(line)
		if m == nil {
			return nil, nil, fmt.Errorf("line %d: %q is not NAME=\"package ...\"", i+1, line)
		}
		name := m[1]
		if _, dup := lists[name]; dup {
			return nil, nil, fmt.Errorf("line %d: %s is defined twice", i+1, name)
		}
		var pkgs []string
		for _, w := range strings.Fields(m[2]) {
			if ref := listRef.FindStringSubmatch(w); ref != nil {
				l, ok := lists[ref[1]]
				if !ok {
					return nil, nil, fmt.Errorf("line %d: %s names %s, which no line above defines", i+1, name, w)
				}
				pkgs = append(pkgs, l...)
				continue
			}
			if !packageName.MatchString(w) {
				return nil, nil, fmt.Errorf("line %d: %s: %q is not a Debian package name", i+1, name, w)
			}
			pkgs = append(pkgs, w)
		}
		seen := map[string]bool{}
		for _, p := range pkgs {
			if seen[p] {
				return nil, nil, fmt.Errorf("line %d: %s names %s twice", i+1, name, p)
			}
			seen[p] = true
		}
		lists[name] = pkgs
		order = append(order, name)
	}
	return lists, order, nil
}
