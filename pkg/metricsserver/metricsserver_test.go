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
		{101, "113m", "275Mi"},     // rounded up to 200 nodes: 100 more, 13m and 75 MiB
		{1000, "288m", "1325Mi"},   // 1,600 nodes: 1,500 more, 188m and 1,125 MiB
		{5000, "888m", "4925Mi"},   // 6,400 nodes
		{12800, "1688m", "8192Mi"}, // memory capped
		{100000, "4000m", "8192Mi"},
	} {
		cpu, memory := Requests(c.nodes)
		if cpu != c.cpu || memory != c.memory {
			t.Errorf("Requests(%d) = %s, %s; want %s, %s", c.nodes, cpu, memory, c.cpu, c.memory)
		}
	}
}
