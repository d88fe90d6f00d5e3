package bench

import (
	"fmt"
	"io"
	"os/exec"
)

// Plot renders the PNG plots of a results folder from its CSV files with
// the plotting program (bench/cmd/benchplot, built by k1m-build bench-tools: a
// Go module of its own, so its dependencies stay out of the Kubernetes
// build's module graph).
func Plot(benchplot, results string, progress io.Writer) error {
	cmd := exec.Command(benchplot, results)
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("plotting %s (%s): %w", results, benchplot, err)
	}
	return nil
}
