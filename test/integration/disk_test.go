package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/testutil"
)

// testDisk checks the disk thresholds every kubelet runs with (read back
// from a running kubelet's /configz, not from the file k1m wrote), then
// deletes an air-gap image from an agent's containerd, as the kubelet's
// image garbage collection would on a full disk, and waits for the agent
// to import it again.
func testDisk(ctx context.Context, t *testing.T, c *cluster) {
	const node = "k1m-node-2"
	raw, err := c.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
	if err != nil {
		t.Fatalf("configz of %s: %v", node, err)
	}
	var configz struct {
		KubeletConfig struct {
			ImageGCHighThresholdPercent int32             `json:"imageGCHighThresholdPercent"`
			ImageGCLowThresholdPercent  int32             `json:"imageGCLowThresholdPercent"`
			EvictionHard                map[string]string `json:"evictionHard"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &configz); err != nil {
		t.Fatal(err)
	}
	got := configz.KubeletConfig
	if got.ImageGCHighThresholdPercent != 85 || got.ImageGCLowThresholdPercent != 80 {
		t.Errorf("image GC thresholds %d%%..%d%%, want 85%%..80%%", got.ImageGCHighThresholdPercent, got.ImageGCLowThresholdPercent)
	}
	if want := map[string]string{"memory.available": "100Mi", "nodefs.available": "5%", "imagefs.available": "5%", "nodefs.inodesFree": "5%"}; !reflect.DeepEqual(got.EvictionHard, want) {
		t.Errorf("evictionHard %v, want %v", got.EvictionHard, want)
	}

	sock := filepath.Join("/run/k1m", node, "containerd", "containerd.sock")
	ctr := func(args ...string) (string, error) {
		out, err := exec.Command("ctr", append([]string{"--address", sock, "--namespace", "k8s.io", "images"}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := ctr("rm", airgap.BusyboxImage); err != nil || strings.TrimSpace(out) != airgap.BusyboxImage {
		t.Fatalf("ctr images rm %s on %s: %v: %s", airgap.BusyboxImage, node, err, out)
	}
	// The agent logs the re-import once ctr has unpacked the image, a
	// moment after containerd lists it: both within the same wait.
	want := fmt.Sprintf("k1m agent: re-imported %s (%s): containerd had lost it", filepath.Join(c.root, "_output", "images", "busybox.tar"), airgap.BusyboxImage)
	testutil.Eventually(t, 75*time.Second, node+"'s agent re-importing "+airgap.BusyboxImage, func() error {
		out, err := ctr("list", "--quiet")
		if err != nil {
			return err
		}
		if !slices.Contains(strings.Fields(out), airgap.BusyboxImage) {
			return fmt.Errorf("containerd lists %q", strings.Fields(out))
		}
		log, err := os.ReadFile(filepath.Join(c.clusterDir, node+".log"))
		if err != nil {
			return err
		}
		if !strings.Contains(string(log), want) {
			return fmt.Errorf("%s.log does not say %q", node, want)
		}
		return nil
	})
}
