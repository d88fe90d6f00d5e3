// Package metricsserver sizes metrics-server (manifests/metrics-server.yaml)
// for the cluster's node count. Each replica scrapes every node once per
// resolution, so its CPU and memory grow with the nodes, and more replicas
// add availability, not capacity.
package metricsserver

import "fmt"

// The sizing, from the benchmark's metrics scenario (docs/components.md,
// "The Metrics API: metrics-server"): at 1,000 to 4,000 simulated nodes
// of 30 pods, a scrape cost metrics-server 0.76 to 0.95 ms of CPU, 0.06
// millicores a node at a 15 s resolution, and its resident memory grew by
// 377 to 386 KiB a node. The requests are twice that above upstream's
// base of 100m and 200 MiB for BaseNodes nodes: 1m of CPU for every
// NodesPerCPUMilli nodes and MemoryKiBPerNode a node beyond BaseNodes.
const (
	BaseNodes        = 100
	BaseCPUMilli     = 100
	BaseMemoryMiB    = 200
	NodesPerCPUMilli = 8
	MemoryKiBPerNode = 768
	// MaxCPUMilli and MaxMemoryMiB cap the requests: a request no node
	// can hold would leave metrics-server Pending. The memory cap is
	// reached at about 10,700 nodes.
	MaxCPUMilli  = 4000
	MaxMemoryMiB = 8192
)

// Requests are metrics-server's CPU and memory requests for nodes nodes,
// as Kubernetes quantities (e.g. "300m", "600Mi"). The node count is
// rounded up to BaseNodes times a power of two, so the Deployment rolls
// its pod only when the cluster doubles.
func Requests(nodes int) (cpu, memory string) {
	step := BaseNodes
	for step < nodes {
		step *= 2
	}
	beyond := step - BaseNodes
	cpuMilli := min(BaseCPUMilli+(beyond+NodesPerCPUMilli-1)/NodesPerCPUMilli, MaxCPUMilli)
	memoryMiB := min(BaseMemoryMiB+(beyond*MemoryKiBPerNode+1023)/1024, MaxMemoryMiB)
	return fmt.Sprintf("%dm", cpuMilli), fmt.Sprintf("%dMi", memoryMiB)
}
