//go:build !k1m_stock

package server

import "k1m.dev/k1m/pkg/config"

// leaseDurationArgs tell the controller-manager the nodes' lease duration,
// which patch 0003 checks its grace period against.
func leaseDurationArgs(lease config.LeaseProfile) []string {
	return []string{"--node-lease-duration=" + lease.LeaseDuration.String()}
}
