// Package metricsserver sizes metrics-server (manifests/metrics-server.yaml)
// for the cluster's node count. Each replica scrapes every node once per
// resolution, so its CPU and memory grow with the nodes, and more replicas
// add availability, not capacity.
package metricsserver

import "fmt"

// Upstream's sizing (metrics-server's README, "Scaling"): 100m of CPU and
// 200 MiB up to BaseNodes nodes, then CPUPerNode and MemoryPerNode more for
// each node beyond.
const (
	BaseNodes        = 100
	BaseCPUMilli     = 100
	BaseMemoryMiB    = 200
	CPUMilliPerNode  = 1
	MemoryMiBPerNode = 2
	// MaxCPUMilli and MaxMemoryMiB cap the requests: a request no node
	// can hold would leave metrics-server Pending.
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
	cpuMilli := min(BaseCPUMilli+CPUMilliPerNode*beyond, MaxCPUMilli)
	memoryMiB := min(BaseMemoryMiB+MemoryMiBPerNode*beyond, MaxMemoryMiB)
	return fmt.Sprintf("%dm", cpuMilli), fmt.Sprintf("%dMi", memoryMiB)
}
