package integration

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/test/clustercheck"
)

// testPersistentVolumes runs a StatefulSet with a claim per replica on the
// default StorageClass, one replica per node, and wants each replica's
// data back after its pod is deleted and after its node's agent restarts;
// then the claims deleted take their directories with them.
func testPersistentVolumes(ctx context.Context, t *testing.T, c *cluster) {
	h := c.harness(t)
	v := clustercheck.StartVolumes(ctx, t, c, "volumes", airgap.BusyboxImage, nodes)
	paths := v.VolumePaths(ctx, t)
	for name, path := range paths {
		if filepath.Dir(path) != h.Plan().StoragePath() {
			t.Errorf("volume %s is at %s, want a directory of --default-local-storage-path %s", name, path, h.Plan().StoragePath())
		}
		if _, err := os.Stat(filepath.Join(path, "line")); err != nil {
			t.Errorf("volume %s: %v", name, err)
		}
	}
	v.DeletePod(ctx, t, 0)

	agent := h.Agent(2).Name
	restarted := time.Now()
	must(t, "restart-agent", h.RestartAgent(ctx, 2))
	clustercheck.LeaseRenewedSince(ctx, t, c.client, agent, restarted)
	v.Check(ctx, t)

	v.Delete(ctx, t)
	for name, path := range paths {
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("volume %s deleted, its directory %s not (stat: %v)", name, path, err)
		}
	}
}

// testMetrics wants the Metrics API answering for every node, then the
// HorizontalPodAutoscaler TestCluster started at its beginning scaling its
// Deployment on CPU.
func testMetrics(ctx context.Context, t *testing.T, c *cluster, hpa *clustercheck.HPA) {
	clustercheck.MetricsAPI(ctx, t, c)
	hpa.WaitScaled(ctx, t)
}
