// Package layout holds the tree to the shape README.md describes: the
// product (cmd/ and pkg/, with manifests/) imports none of the tooling that
// builds, tests and measures it (build/, bench/, test/, conformance/), and
// README's layout table names every top-level tree and every command.
package layout

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Module is k1m's module path.
const Module = "k1m.dev/k1m"

// ProductTrees are the directories that ship (in the k1m binary, the kind
// node image or the release).
var ProductTrees = []string{"cmd", "pkg"}

// productImports are the module's trees a product package may import.
var productImports = []string{"pkg", "manifests"}

// TableHeader starts README.md's layout table.
const TableHeader = "| path | what |"

// CheckProductImports parses every Go file (tests too) under the product
// trees of root and reports each import of one of the module's packages
// outside pkg/ and manifests/, naming the file.
func CheckProductImports(root string) ([]error, error) {
	var errs []error
	for _, tree := range ProductTrees {
		err := filepath.WalkDir(filepath.Join(root, tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			bad, err := toolingImports(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, imp := range bad {
				errs = append(errs, fmt.Errorf("%s imports %s: the product (%s) may import only %s of this module; move the code it needs into pkg/", rel, imp, strings.Join(ProductTrees, "/, ")+"/", strings.Join(productImports, "/, ")+"/"))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return errs, nil
}

func toolingImports(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return nil, err
		}
		if rest, ok := strings.CutPrefix(imp, Module+"/"); ok && !allowed(rest) {
			bad = append(bad, imp)
		}
	}
	return bad, nil
}

func allowed(rel string) bool {
	for _, t := range productImports {
		if rel == t || strings.HasPrefix(rel, t+"/") {
			return true
		}
	}
	return false
}

// CheckReadmeTable reports every top-level tree of root (hidden ones and
// generated _output aside) and every command (a directory of package main
// files) that README.md's layout table does not name in backquotes.
func CheckReadmeTable(readme []byte, root string) ([]error, error) {
	named, err := tablePaths(readme)
	if err != nil {
		return []error{err}, nil
	}
	want, err := namedTrees(root)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, p := range want {
		if !named[p] {
			errs = append(errs, fmt.Errorf("README.md's layout table has no row naming `%s/`: add one saying what it is", p))
		}
	}
	return errs, nil
}

// tablePaths returns the paths the layout table names, without a
// trailing slash.
func tablePaths(readme []byte) (map[string]bool, error) {
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() && strings.TrimSpace(sc.Text()) != TableHeader {
	}
	if !sc.Scan() {
		return nil, fmt.Errorf("README.md has no layout table (a line %q)", TableHeader)
	}
	named := map[string]bool{}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		parts := strings.Split(cells[1], "`")
		for i := 1; i < len(parts); i += 2 {
			named[strings.TrimSuffix(parts[i], "/")] = true
		}
	}
	return named, nil
}

// namedTrees lists the top-level directories and the command directories
// under root, sorted.
func namedTrees(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			out = append(out, e.Name())
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
