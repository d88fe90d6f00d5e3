package server

import (
	"net/netip"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/podnet"
)

// routeRules is what the pod route publisher allows a node: a node range
// of the cluster range as the controller-manager's IPAM cuts them, routed
// through an address that is no server's but its own node's (the servers
// the approver knows).
func (s *Server) routeRules(client kubernetes.Interface) podnet.RouteRules {
	// Both checked by Complete.
	clusterCIDR, _ := netip.ParsePrefix(s.cfg.ClusterCIDR)
	serviceCIDR, _ := netip.ParsePrefix(s.cfg.ServiceCIDR)
	return podnet.RouteRules{ClusterCIDR: clusterCIDR.Masked(), NodeMask: constants.DefaultNodeMask, ServiceCIDR: serviceCIDR.Masked(),
		Servers: s.controlPlane(client).Servers}
}
