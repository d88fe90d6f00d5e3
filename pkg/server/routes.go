package server

import (
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/podnet"
)

// routeRules is what the pod route publisher allows a node: a node range
// of the cluster range as the controller-manager's IPAM cuts them, routed
// through an address that is no server's but its own node's (the servers
// the approver knows).
func (s *Server) routeRules(client kubernetes.Interface) podnet.RouteRules {
	return podnet.RouteRules{ClusterCIDR: s.cfg.ClusterPrefix, NodeMask: constants.DefaultNodeMask, ServiceCIDR: s.cfg.ServicePrefix,
		Servers: s.servers(client)}
}
