package agent

import (
	"context"

	"k1m.dev/k1m/pkg/podnet"
)

// enableForwarding lets the node route pod traffic.
func (n *node) enableForwarding(context.Context) error { return podnet.EnableForwarding() }

// runPodNetwork starts the controller that writes the node's CNI config
// and routes the pod ranges other nodes publish.
func (n *node) runPodNetwork(ctx context.Context) error {
	p := n.cfg.Paths
	podnet.Network{Self: n.cfg.NodeName, ConfDir: p.CNIConfDir, IPAMDir: p.CNIIPAMDir, Published: true}.Run(ctx, n.client)
	return nil
}
