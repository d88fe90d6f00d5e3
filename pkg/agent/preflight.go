package agent

import (
	"context"
	"fmt"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/preflight"
)

// preflight checks, before anything is written, what the node needs of
// the machine: the image archives, its directories and the kernel.
func (n *node) preflight(context.Context) error {
	if _, err := airgap.Archives(n.cfg.ImagesDir); err != nil {
		return fmt.Errorf("--images-dir: %w", err)
	}
	if err := preflight.Writable("--data-dir", n.cfg.DataDir); err != nil {
		return err
	}
	if err := preflight.Writable("--run-dir", n.cfg.RunDir); err != nil {
		return err
	}
	return preflight.Kernel("/")
}
