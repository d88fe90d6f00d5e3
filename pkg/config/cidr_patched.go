//go:build !k1m_stock

package config

// DefaultClusterCIDR holds 2^20 node /64s (patch 0008 lets node IPAM cut
// that many).
const DefaultClusterCIDR = "fddf:4035:b500::/44"

// MaxNodeMaskBits is node IPAM's limit between cluster CIDR and node mask
// (patch 0008 raised it from 16).
const MaxNodeMaskBits = 20
