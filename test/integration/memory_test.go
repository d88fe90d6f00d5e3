package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testControlPlaneMemory checks the sizing rule of a server that runs a
// node agent (docs/operations.md) end to end: the server process sits in
// its own cgroup with a quarter of the machine's memory as its limit, its
// Go runtime follows that limit (not the machine), and its node's kubelet
// reserves exactly that much so pods are not scheduled into it.
func testControlPlaneMemory(ctx context.Context, t *testing.T, c *cluster) {
	node := serverNodeName(ctx, t, c, []string{"k1m-node-1", "k1m-node-2"})
	n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capacity := n.Status.Capacity.Memory().Value()
	want := min(max(capacity/4, 2<<30), capacity/2)

	pid, err := os.ReadFile(filepath.Join(c.clusterDir, "server.pid"))
	if err != nil {
		t.Fatal(err)
	}
	procCgroup, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	cgroup := "/k1m-control-plane/" + node
	if !strings.Contains(string(procCgroup), ":memory:"+cgroup+"\n") {
		t.Errorf("the server runs in memory cgroup\n%swant %s", procCgroup, cgroup)
	}
	limitFile := filepath.Join("/sys/fs/cgroup/memory", cgroup, "memory.limit_in_bytes")
	raw, err := os.ReadFile(limitFile)
	if err != nil {
		t.Fatal(err)
	}
	limit, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if limit != want/4096*4096 { // the kernel keeps whole pages
		t.Errorf("%s = %d, want %d (a quarter of %d)", limitFile, limit, want/4096*4096, capacity)
	}

	log, err := os.ReadFile(filepath.Join(c.clusterDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	all := tuningLine.FindAllSubmatch(log, -1)
	if len(all) == 0 {
		t.Fatal("no Go runtime tuning line")
	}
	last := all[len(all)-1]
	if got := fmt.Sprintf("%s bytes (%s), GOMEMLIMIT=%s", last[1], last[2], last[3]); got != fmt.Sprintf("%d bytes (cgroup), GOMEMLIMIT=%d", limit, int64(float64(limit)*0.9)) {
		t.Errorf("the server's last runtime tuning: %s, want its cgroup's limit %d and 90%% of it", got, limit)
	}

	raw, err = c.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var configz struct {
		KubeletConfig struct {
			KubeReserved map[string]string `json:"kubeReserved"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &configz); err != nil {
		t.Fatal(err)
	}
	// The server reserves what its cgroup enforces (whole pages).
	if got := configz.KubeletConfig.KubeReserved; len(got) != 1 || got["memory"] != strconv.FormatInt(limit, 10) {
		t.Errorf("kubelet kubeReserved %v, want memory %d", got, limit)
	}
	if got, wantAllocatable := n.Status.Allocatable.Memory().Value(), capacity-limit-100<<20; got != wantAllocatable {
		t.Errorf("allocatable memory %d, want capacity %d - reserved %d - eviction 100Mi = %d", got, capacity, limit, wantAllocatable)
	}
}
