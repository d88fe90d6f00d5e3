package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/join"
)

// testReleaseSkew reads the release the server recorded in k1m-cluster
// (the one its binary reports), then records a server of an older minor
// release beside it, as a cluster halfway through a downgrade or with a
// server left behind would: an agent of this release is refused before it
// writes anything, naming both releases. The record is put back after.
func testReleaseSkew(ctx context.Context, t *testing.T, c *cluster) {
	cms := c.client.CoreV1().ConfigMaps(join.PublicNamespace)
	cm, err := cms.Get(ctx, join.SettingsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(c.k1m, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	mine := strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes ")
	recorded := join.ServerVersions(cm.Data)
	if want := map[string]string{"[fddf:4035:b520::1]:6443": mine}; !reflect.DeepEqual(recorded, want) {
		t.Fatalf("k1m-cluster records the servers' releases %v, want %v", recorded, want)
	}
	const older, olderAddr = "v1.31.0+k1m.0123456789ab", "[fddf:4035:b520::99]:6443"
	setVersions(ctx, t, c, map[string]string{"[fddf:4035:b520::1]:6443": mine, olderAddr: older})
	t.Cleanup(func() { setVersions(context.Background(), t, c, recorded) })

	token, err := os.ReadFile(filepath.Join(c.dataRoot, "server", "token"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	args := []string{"agent", "--server", "https://[fddf:4035:b520::1]:6443", "--token", strings.TrimSpace(string(token)),
		"--node-name", "k1m-skew-test", "--images-dir", filepath.Join(c.root, "_output", "images"),
		"--data-dir", dataDir, "--run-dir", filepath.Join(dir, "run")}
	out, err = exec.CommandContext(ctx, c.k1m, args...).CombinedOutput()
	want := fmt.Sprintf("--server https://[fddf:4035:b520::1]:6443: this agent runs %s and server %s runs %s: an agent may not be newer than a server (a kubelet may not be newer than kube-apiserver); upgrade every server first (docs/operations.md#upgrades)", mine, olderAddr, older)
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("an agent newer than a server: %v, want the refusal %q; got:\n%s", err, want, tail(out))
	}
	if files := listFiles(dataDir); len(files) > 0 {
		t.Errorf("the refused agent left files behind: %v", files)
	}
}

// setVersions writes the servers' releases in k1m-cluster.
func setVersions(ctx context.Context, t *testing.T, c *cluster, versions map[string]string) {
	t.Helper()
	encoded, _ := json.Marshal(versions)
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{"serverVersions": string(encoded)}})
	if _, err := c.client.CoreV1().ConfigMaps(join.PublicNamespace).Patch(ctx, join.SettingsName, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
