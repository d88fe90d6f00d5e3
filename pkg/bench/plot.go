package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// PlotDir holds the plotting program, a Go module of its own so its
// dependencies (gonum plot) stay out of the Kubernetes build's module graph.
const PlotDir = "hack/benchplot"

// Plot renders the PNG plots of a results folder from its CSV files.
func Plot(results string, progress io.Writer) error {
	abs, err := filepath.Abs(results)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "run", ".", abs)
	cmd.Dir = PlotDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("plotting %s (go run ./%s): %w", results, PlotDir, err)
	}
	return nil
}
