package tool

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BenchTools are where bench-tools puts what make bench runs besides the
// k1m and stock builds; the Makefile passes these paths to k1m-bench.
type BenchTools struct{ Benchplot string }

// benchToolPaths are the paths under out.
func benchToolPaths(out string) BenchTools {
	return BenchTools{Benchplot: filepath.Join(out, "tools", "benchplot")}
}

// benchTools builds the plotting program bench/cmd/benchplot (a module of its
// own, so that gonum stays out of the Kubernetes build). Nothing is built
// at benchmark time. (The node ramp's simulator is k1m-bench itself.)
func (p project) benchTools() error {
	out, err := filepath.Abs(p.out)
	if err != nil {
		return err
	}
	// Absolute: benchplot is built from its own directory.
	paths := benchToolPaths(out)
	outsideWork := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	fmt.Fprintf(p.log, "k1m-build: building bench/cmd/benchplot into %s\n", paths.Benchplot)
	plot := exec.Command("go", "build", "-trimpath", "-o", paths.Benchplot, ".")
	plot.Env, plot.Dir = outsideWork, filepath.Join(p.root, "bench", "cmd", "benchplot")
	plot.Stdout, plot.Stderr = p.log, p.log
	if err := plot.Run(); err != nil {
		return fmt.Errorf("building bench/cmd/benchplot: %w", err)
	}
	return nil
}
