//go:build k1m_stock

package config

// DefaultClusterCIDR of the stock build: the unpatched node IPAM refuses a
// cluster CIDR more than 16 bits wider than the /64 node ranges.
const DefaultClusterCIDR = "fddf:4035:b500::/48"

// MaxNodeMaskBits is upstream node IPAM's limit between cluster CIDR and
// node mask.
const MaxNodeMaskBits = 16
