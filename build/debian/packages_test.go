package debian

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseLists(t *testing.T) {
	lists, order, err := ParseLists("# c\n\nA=\"aa b2\"\nB=\"x-y $A y.z\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"A", "B"}) || !slices.Equal(lists["B"], []string{"x-y", "aa", "b2", "y.z"}) {
		t.Errorf("lists %v order %v", lists, order)
	}
	for _, bad := range []string{
		`A="$B"`,                    // not defined above
		"A=\"aa\"\nA=\"bb\"",        // twice
		"A=\"aa\"\nB=\"aa $A\"",     // a package twice in one list
		`A='aa bb'`,                 // not the form
		`A="aa" # c`,                // nor this
		`export A="aa"`,             // nor this
		"A=\"aa `id`\"",             // not a package name
		`A="aa $(id)"`,              // nor this
		`A="aa ${B}"`,               // nor this
		`A="Upper"`,                 // nor this
		`A="a"`,                     // nor this (two characters at least)
		"A=\"aa\"\nB=\"$Ab\"",       // $Ab is no list
		"A=\"aa\"\nB=\"$A_MORE\"",   // nor $A_MORE
		"A=\"aa\"\nB=\"${A}\"",      // only $NAME
		"A=\"aa\"\nB=\"bb\\\\ cc\"", // no escapes
	} {
		if _, _, err := ParseLists(bad); err == nil {
			t.Errorf("ParseLists accepted %q", bad)
		}
	}
}

// TestShellReadsTheListsAsGoDoes sources packages.env in bash, as the
// scripts do, and compares every list with Packages.
func TestShellReadsTheListsAsGoDoes(t *testing.T) {
	names := ListNames()
	script := `set -euo pipefail; . ./packages.env; for n in "$@"; do printf '%s=%s\n' "$n" "${!n}"; done`
	out, err := exec.Command("bash", append([]string{"-c", script, "bash"}, names...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("bash sourcing packages.env: %v\n%s", err, out)
	}
	var want strings.Builder
	for _, n := range names {
		want.WriteString(n + "=" + strings.Join(Packages(n), " ") + "\n")
	}
	if string(out) != want.String() {
		t.Errorf("bash reads packages.env as\n%s\nGo as\n%s", out, want.String())
	}
}

// TestListsAgree holds the lists to what their consumers need of each
// other.
func TestListsAgree(t *testing.T) {
	runtime, cluster, base := Packages("RUNTIME_PACKAGES"), Packages("CLUSTER_PACKAGES"), Packages("KIND_BASE_PACKAGES")
	for _, p := range runtime {
		if !slices.Contains(cluster, p) {
			t.Errorf("%s is a runtime package but not in CLUSTER_PACKAGES: make cluster would run k1m without it", p)
		}
		if !slices.Contains(base, p) && p != "ipset" {
			t.Errorf("%s is a runtime package but not in KIND_BASE_PACKAGES: kind's nodes would lack what k1m's have", p)
		}
	}
	for _, p := range Packages("KIND_PROXY_PACKAGES") {
		if !slices.Contains(base, p) {
			t.Errorf("kube-proxy's image takes %s from the kind base tree, which does not install it", p)
		}
	}
	for _, p := range Packages("KIND_CNI_PACKAGES") {
		if !slices.Contains(base, p) {
			t.Errorf("k1m-cni's image takes %s from the kind base tree, which does not install it", p)
		}
	}
	for _, p := range Packages("CRI_PACKAGES") {
		if !slices.Contains(runtime, p) {
			t.Errorf("%s is in CRI_PACKAGES but not in RUNTIME_PACKAGES", p)
		}
	}
}

// repo is the checkout this package is in.
const repo = "../.."

// TestScriptsReadTheLists runs the readers of packages.env: hack/install.sh's
// lines that read RUNTIME_PACKAGES in a checkout (copied with the file, at
// the same relative place), the release's install.sh hack/release.sh writes,
// and hack/install-deps.sh cluster on a machine lacking every package.
func TestScriptsReadTheLists(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(repo, "hack", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(script), "\n")
	first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "# >>> RUNTIME_PACKAGES") })
	last := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "# <<< RUNTIME_PACKAGES") })
	if first < 0 || last < first {
		t.Fatal("hack/install.sh has no lines from # >>> RUNTIME_PACKAGES to # <<< RUNTIME_PACKAGES reading build/debian/packages.env (hack/release.sh replaces them)")
	}
	dir := t.TempDir()
	block := "set -euo pipefail\n" + strings.Join(lines[first:last+1], "") + `printf '%s\n' "${RUNTIME_PACKAGES[@]}"` + "\n"
	for path, data := range map[string]string{"hack/block.sh": block, "build/debian/packages.env": PackagesFile} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runtime := Packages("RUNTIME_PACKAGES")
	out, err := exec.Command("bash", filepath.Join(dir, "hack", "block.sh")).CombinedOutput()
	if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, runtime) {
		t.Errorf("hack/install.sh in a checkout reads RUNTIME_PACKAGES as %q (%v), want %q", got, err, runtime)
	}

	cmd := exec.Command("bash", "hack/release.sh", "install-sh")
	cmd.Dir = repo
	var stderr strings.Builder
	cmd.Stderr = &stderr
	release, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/release.sh install-sh: %v\n%s", err, stderr.String())
	}
	rel := strings.SplitAfter(string(release), "\n")
	assign := slices.IndexFunc(rel, func(l string) bool { return strings.HasPrefix(l, "RUNTIME_PACKAGES=") })
	if want := "RUNTIME_PACKAGES=(" + strings.Join(runtime, " ") + ")\n"; assign < 0 || rel[assign] != want {
		t.Errorf("the release's install.sh does not set %q", want)
	} else if strings.Join(rel[:first], "") != strings.Join(lines[:first], "") || strings.Join(rel[assign+1:], "") != strings.Join(lines[last+1:], "") {
		t.Error("the release's install.sh differs from hack/install.sh outside the RUNTIME_PACKAGES lines")
	}
	if out, err := exec.Command("bash", "-n", "-c", string(release)).CombinedOutput(); err != nil {
		t.Errorf("the release's install.sh: bash -n: %v\n%s", err, out)
	}

	// install-deps on a machine with none of the packages, as a user who
	// cannot install them: it names what it would install.
	stubs := t.TempDir()
	for name, body := range map[string]string{"dpkg-query": "exit 1", "id": "echo 1000", "go": "exit 0", "apt-get": "echo apt-get must not run >&2; exit 3"} {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd = exec.Command("bash", "hack/install-deps.sh", "cluster")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, _ = cmd.CombinedOutput()
	if want := "install-deps: missing packages " + strings.Join(Packages("CLUSTER_PACKAGES"), " ") + "; run as root or install them with apt-get\n"; string(out) != want {
		t.Errorf("hack/install-deps.sh cluster said\n%s\nwant\n%s", out, want)
	}
}

// TestNoOtherCopy fails when a list naming two or more of the runtime
// packages appears outside packages.env: a line of a shell script or the
// Makefile (comments aside), or in Go a list of strings or a string of
// words that could all be package names.
func TestNoOtherCopy(t *testing.T) {
	runtime := Packages("RUNTIME_PACKAGES")
	named := func(words []string) []string {
		var found []string
		for _, w := range words {
			if slices.Contains(runtime, w) && !slices.Contains(found, w) {
				found = append(found, w)
			}
		}
		return found
	}
	shellWord := regexp.MustCompile(`[^\s"'()=;{}\[\]]+`)
	scripts, _ := filepath.Glob(filepath.Join(repo, "hack", "*.sh"))
	for _, path := range append(scripts, filepath.Join(repo, "Makefile")) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if found := named(shellWord.FindAllString(line, -1)); len(found) > 1 {
				t.Errorf("%s:%d names %s: a package list of its own; read build/debian/packages.env", rel(path), i+1, strings.Join(found, ", "))
			}
		}
	}
	for _, tree := range []string{"cmd", "pkg", "manifests", "build", "test", "bench", "conformance"} {
		err := filepath.WalkDir(filepath.Join(repo, tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var words []string
				switch n := n.(type) {
				case *ast.CompositeLit: // a list of strings
					for _, e := range n.Elts {
						s, ok := stringLit(e)
						if !ok {
							return true
						}
						words = append(words, s)
					}
				case *ast.BasicLit: // a string of package names
					if s, ok := stringLit(n); ok {
						words = strings.Fields(s)
						if !slices.ContainsFunc(words, func(w string) bool { return !packageName.MatchString(w) }) {
							break
						}
						words = nil
					}
				}
				if found := named(words); len(found) > 1 {
					t.Errorf("%s names %s: a package list of its own; use debian.Packages", rel(path), strings.Join(found, ", "))
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func rel(path string) string {
	r, _ := filepath.Rel(repo, path)
	return r
}

// TestInstallDocNamesTheRuntimePackages holds docs/install.md's list of
// what install.sh installs to RUNTIME_PACKAGES.
func TestInstallDocNamesTheRuntimePackages(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "the Debian packages k1m runs with (" + strings.Join(Packages("RUNTIME_PACKAGES"), ", ") + ")"
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), want) {
		t.Errorf("docs/install.md does not say %q: write what install.sh installs", want)
	}
}
