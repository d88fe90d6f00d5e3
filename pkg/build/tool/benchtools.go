package tool

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k1m.dev/k1m/pkg/bench/kwokstages"
)

// BenchTools are where bench-tools puts what make bench runs besides the
// k1m and stock builds; the Makefile passes these paths to k1m-bench.
type BenchTools struct{ Kwok, KwokStages, Benchplot string }

// benchToolPaths are the paths under out for a kwok version.
func benchToolPaths(out, kwokVersion string) BenchTools {
	dir := filepath.Join(out, "tools")
	return BenchTools{
		Kwok:       filepath.Join(dir, "kwok-"+kwokVersion, "kwok"),
		KwokStages: filepath.Join(dir, "kwok-"+kwokVersion, "stages.yaml"),
		Benchplot:  filepath.Join(dir, "benchplot"),
	}
}

// benchTools builds kwok at the pinned KWOK_VERSION (as its own main
// module, outside k1m's module graph), writes its node stages, and builds
// the plotting program hack/benchplot (a module of its own, so that gonum
// stays out of the Kubernetes build). Nothing is built at benchmark time.
func (p project) benchTools() error {
	pn, err := p.pins()
	if err != nil {
		return err
	}
	version, err := pn.Get("KWOK_VERSION")
	if err != nil {
		return err
	}
	out, err := filepath.Abs(p.out)
	if err != nil {
		return err
	}
	// Absolute: go install wants an absolute GOBIN, and benchplot is built
	// from its own directory.
	paths := benchToolPaths(out, version)
	if err := os.MkdirAll(filepath.Dir(paths.Kwok), 0o755); err != nil {
		return err
	}
	outsideWork := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if _, err := os.Stat(paths.Kwok); err != nil {
		fmt.Fprintf(p.log, "k1m-build: building kwok %s into %s (once; a few minutes cold)\n", version, paths.Kwok)
		install := exec.Command("go", "install", "-trimpath", "-ldflags=-s -w", kwokstages.Module+"/cmd/kwok@"+version)
		install.Env = append(outsideWork, "GOBIN="+filepath.Dir(paths.Kwok))
		install.Dir = os.TempDir()
		install.Stdout, install.Stderr = p.log, p.log
		if err := install.Run(); err != nil {
			return fmt.Errorf("building kwok %s: %w", version, err)
		}
	}
	download := exec.Command("go", "mod", "download", "-json", kwokstages.Module+"@"+version)
	download.Env, download.Dir = outsideWork, os.TempDir()
	listing, err := download.Output()
	if err != nil {
		return fmt.Errorf("go mod download %s@%s: %w", kwokstages.Module, version, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(listing, &info); err != nil || info.Dir == "" {
		return fmt.Errorf("go mod download %s@%s: no module directory in %q", kwokstages.Module, version, listing)
	}
	if err := kwokstages.Write(info.Dir, paths.KwokStages); err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: building hack/benchplot into %s\n", paths.Benchplot)
	plot := exec.Command("go", "build", "-trimpath", "-o", paths.Benchplot, ".")
	plot.Env, plot.Dir = outsideWork, filepath.Join(p.root, "hack", "benchplot")
	plot.Stdout, plot.Stderr = p.log, p.log
	if err := plot.Run(); err != nil {
		return fmt.Errorf("building hack/benchplot: %w", err)
	}
	return nil
}
