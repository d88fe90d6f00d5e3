package agent

import (
	"context"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/containerd"
)

// startContainerd starts the node's containerd; it stops when Run
// returns (the pods' shims keep running).
func (n *node) startContainerd(ctx context.Context) error {
	restrict, err := containerd.LacksSysResource()
	if err != nil {
		return err
	}
	p := n.cfg.Paths
	n.ctrd = containerd.Config{Root: p.ContainerdRoot, State: p.ContainerdState, CNIConfDir: p.CNIConfDir, CNIBinDir: p.CNIBinDir, RestrictOOMScoreAdj: restrict}
	n.say("starting containerd (%s, log %s)", n.ctrd.Address(), p.ContainerdLog)
	n.runtime, err = containerd.Start(ctx, n.ctrd, p.ContainerdLog)
	if err != nil {
		return err
	}
	n.onStop(n.runtime.Stop)
	return nil
}

// importImages imports the air-gap images, then puts back those
// containerd loses for as long as ctx lasts.
func (n *node) importImages(ctx context.Context) error {
	n.say("importing images from %s", n.cfg.ImagesDir)
	if err := airgap.Import(ctx, n.ctrd.Address(), n.cfg.ImagesDir); err != nil {
		return err
	}
	go airgap.Guard(ctx, n.ctrd.Address(), n.cfg.ImagesDir, n.cfg.Timings.ImageGuard, func(msg string) { n.say("%s", msg) })
	return nil
}
