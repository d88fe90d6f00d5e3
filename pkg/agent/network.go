package agent

import (
	"context"
	"net/netip"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/netpol"
	"k1m.dev/k1m/pkg/podnet"
)

// enableForwarding lets the node route pod traffic.
func (n *node) enableForwarding(context.Context) error { return podnet.EnableForwarding() }

// runPodNetwork starts the controller that writes the node's CNI config
// and routes the pod ranges the servers publish, or none when the
// cluster's pod ranges are routed by the provider's network (k1m-cluster's
// podRoutes).
func (n *node) runPodNetwork(ctx context.Context) error {
	p := n.cfg.Paths
	// Checked by the server that published it; an unparsable one bounds
	// nothing (the published routes are then taken as they are).
	clusterCIDR, _ := netip.ParsePrefix(n.settings.ClusterCIDR)
	podnet.Network{Self: n.cfg.NodeName, ConfDir: p.CNIConfDir, IPAMDir: p.CNIIPAMDir, Routes: routeSource(n.settings.PodRoutes), ClusterCIDR: clusterCIDR}.Run(ctx, n.client)
	// The node's NetworkPolicy rules, published by a server (pkg/netpol).
	go (&netpol.Enforcer{Client: n.client, Node: n.cfg.NodeName}).Run(ctx)
	if n.settings.PodRoutes == constants.PodRoutesProvider {
		n.say("pod ranges routed by the provider's network (k1m-cluster's podRoutes: %s): the node installs no routes to other nodes' pods", n.settings.PodRoutes)
	}
	return nil
}

// routeSource is where the node's routes to other nodes' pods come from.
func routeSource(routes constants.PodRoutes) podnet.RouteSource {
	if routes == constants.PodRoutesProvider {
		return podnet.RoutesByProvider
	}
	return podnet.RoutesPublished
}
