package layout

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func messages(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestCheckProductImportsRefusesTooling(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"pkg/a/a.go":        "package a\nimport _ \"k1m.dev/k1m/pkg/b\"\nimport _ \"k1m.dev/k1m/manifests\"\nimport _ \"k8s.io/client-go/kubernetes\"\n",
		"pkg/a/a_test.go":   "package a\nimport _ \"k1m.dev/k1m/build/pins\"\n",
		"cmd/k1m/main.go":   "package main\nimport _ \"k1m.dev/k1m/test/localcluster\"\n",
		"bench/x/x.go":      "package x\nimport _ \"k1m.dev/k1m/build/pins\"\n",
		"pkg/b/b.go":        "package b\n",
		"pkg/b/pkgbench.go": "package b\nimport _ \"k1m.dev/k1m/pkgbench\"\n",
	})
	errs, err := CheckProductImports(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cmd/k1m/main.go imports k1m.dev/k1m/test/localcluster: the product (cmd/, pkg/) may import only pkg/, manifests/ of this module; move the code it needs into pkg/",
		"pkg/a/a_test.go imports k1m.dev/k1m/build/pins: the product (cmd/, pkg/) may import only pkg/, manifests/ of this module; move the code it needs into pkg/",
		"pkg/b/pkgbench.go imports k1m.dev/k1m/pkgbench: the product (cmd/, pkg/) may import only pkg/, manifests/ of this module; move the code it needs into pkg/",
	}
	if got := messages(errs); !reflect.DeepEqual(got, want) {
		t.Fatalf("errors:\n%q\nwant\n%q", got, want)
	}
}

// The real tree: the product imports no tooling.
func TestThisTreesProductImportsNoTooling(t *testing.T) {
	errs, err := CheckProductImports(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatal(messages(errs))
	}
}

func TestCheckReadmeTableNamesEveryTreeAndCommand(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"cmd/k1m/main.go":          "package main\n",
		"pkg/a/a.go":               "package a\n",
		"bench/cmd/tool/main.go":   "// Command tool.\npackage main\n",
		"bench/cmd/tool/x_test.go": "package main\n",
		"docs/a.md":                "",
		".ci/run":                  "",
		"_output/bin/cmd/main.go":  "package main\n",
		"pkg/a/testdata/m/main.go": "package main\n",
	})
	readme := []byte("# x\n\n| path | what |\n|---|---|\n| `cmd/k1m`, `pkg/` | the product |\n| `bench/` | tools |\n\nafter | `docs/` |\n")
	errs, err := CheckReadmeTable(readme, root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md's layout table has no row naming `bench/cmd/tool/`: add one saying what it is",
		"README.md's layout table has no row naming `cmd/`: add one saying what it is",
		"README.md's layout table has no row naming `docs/`: add one saying what it is",
	}
	if got := messages(errs); !reflect.DeepEqual(got, want) {
		t.Fatalf("errors:\n%q\nwant\n%q", got, want)
	}
	errs, _ = CheckReadmeTable([]byte("# no table\n"), root)
	if got := messages(errs); !reflect.DeepEqual(got, []string{`README.md has no layout table (a line "| path | what |")`}) {
		t.Fatalf("without a table: %q", got)
	}
}

func TestThisTreesReadmeTable(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	errs, err := CheckReadmeTable(readme, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatal(messages(errs))
	}
}
