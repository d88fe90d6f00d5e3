//go:build k1m_stock

package server

import "k1m.dev/k1m/pkg/config"

// leaseDurationArgs: the unpatched controller-manager has no
// --node-lease-duration (patch 0003 adds it); the grace period still
// follows the lease profile.
func leaseDurationArgs(config.LeaseProfile) []string { return nil }
