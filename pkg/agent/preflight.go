package agent

import (
	"context"
	"errors"
	"fmt"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/nodename"
	"k1m.dev/k1m/pkg/preflight"
)

// preflight checks, before anything is written, what the node needs of
// the machine: the image archives, its directories, the node name its
// data was made for and the kernel; then records that name.
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
	if err := checkNodeName(n.cfg.DataDir, n.cfg.Paths.KubeletClientCert, n.cfg.NodeName); err != nil {
		return err
	}
	return preflight.Kernel("/")
}

// joinAndRecord joins (or resumes), then records the node name the data
// directory is for: only then, so that a join refused leaves nothing.
func (n *node) joinAndRecord(ctx context.Context) error {
	if err := n.joinOrResume(ctx); err != nil {
		return err
	}
	return nodename.Record(n.cfg.DataDir, n.cfg.NodeName)
}

// checkNodeName refuses a node started on a data directory made for
// another node name (package nodename says why), naming both and the flag.
func checkNodeName(dataDir, clientCert, name string) error {
	var m *nodename.Mismatch
	if err := nodename.Check(dataDir, clientCert, name); !errors.As(err, &m) {
		return err
	}
	return fmt.Errorf("--node-name %s (the host name when not given): the data directory %s was made for node %s: start it with --node-name %s, or give this node an empty --data-dir (and remove the old one: k1m kubectl delete node %s)",
		m.Wanted, m.DataDir, m.Recorded, m.Recorded, m.Recorded)
}
