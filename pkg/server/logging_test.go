package server

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The server's own lines are written one way: step and warn, to the
// server's output. No klog or log call, and no other fmt.Print or
// Fprint, in pkg/server (remove.go and migrate.go are the k1m server
// remove and k1m etcd-partitions migrate commands', which print to their
// caller's output).
func TestOneLoggingPath(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "remove.go" || name == "migrate.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if ok && fn.Recv != nil && (fn.Name.Name == "step" || fn.Name.Name == "warn") {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if ok && (pkg.Name == "klog" || pkg.Name == "fmt" && (strings.HasPrefix(sel.Sel.Name, "Fprint") || strings.HasPrefix(sel.Sel.Name, "Print")) || pkg.Name == "log") {
					t.Errorf("%s: %s.%s: the server's lines go through s.step or s.warn", fset.Position(call.Pos()), pkg.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

func TestStepAndWarnLines(t *testing.T) {
	var out bytes.Buffer
	s := &Server{out: &out}
	s.step("starting %s", "etcd")
	s.warn("scheduled etcd snapshot failed: %v", "disk full")
	want := regexp.MustCompile(`^k1m server: starting etcd\nk1m server: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: warning: scheduled etcd snapshot failed: disk full\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("lines %q, want them to match %s", out.String(), want)
	}
}
