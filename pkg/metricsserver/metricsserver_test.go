package metricsserver

import "testing"

func TestRequests(t *testing.T) {
	for _, c := range []struct {
		nodes       int
		cpu, memory string
	}{
		{0, "100m", "200Mi"},
		{3, "100m", "200Mi"},
		{100, "100m", "200Mi"},
		{101, "200m", "400Mi"},    // rounded up to 200 nodes
		{1000, "1600m", "3200Mi"}, // 1,600 nodes: 100m + 1,500 x 1m
		{5000, "4000m", "8192Mi"}, // capped
		{100000, "4000m", "8192Mi"},
	} {
		cpu, memory := Requests(c.nodes)
		if cpu != c.cpu || memory != c.memory {
			t.Errorf("Requests(%d) = %s, %s; want %s, %s", c.nodes, cpu, memory, c.cpu, c.memory)
		}
	}
}
