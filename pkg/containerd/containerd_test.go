package containerd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k1m.dev/k1m/pkg/airgap"
)

func TestRenderCarriesTheSettingsThisMachineNeeds(t *testing.T) {
	c := Config{Root: "/var/lib/k1m/agent/containerd", State: "/run/k1m/agent/containerd", CNIConfDir: "/etc/cni", CNIBinDir: "/usr/lib/cni", RestrictOOMScoreAdj: true}
	out, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`sandbox_image = "` + airgap.PauseImage + `"`,
		"restrict_oom_score_adj = true",
		`snapshotter = "overlayfs"`,
		"SystemdCgroup = false",
		`address = "/run/k1m/agent/containerd/containerd.sock"`,
		`conf_dir = "/etc/cni"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config.toml lacks %q:\n%s", want, out)
		}
	}
}

// TestStartImportsAndRunsNothingPulled starts the real containerd and
// imports the built pause image; it needs root and `make images`.
func TestStartAndImport(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("containerd"); err != nil {
		t.Skip("containerd not installed (make deps-cluster)")
	}
	images := filepath.Join("..", "..", "_output", "images")
	if _, err := airgap.Archives(images); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	restrict, err := LacksSysResource()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Root: filepath.Join(dir, "root"), State: filepath.Join("/run/k1m-test", filepath.Base(dir)), CNIConfDir: filepath.Join(dir, "cni"), CNIBinDir: "/usr/lib/cni", RestrictOOMScoreAdj: restrict}
	defer os.RemoveAll(c.State)
	ctx := context.Background()
	p, err := Start(ctx, c, filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if _, err := Start(ctx, c, filepath.Join(dir, "second.log")); err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Fatalf("a second containerd on the same socket: want an 'already serves' error, got %v", err)
	}
	if err := airgap.Import(ctx, c.Address(), images); err != nil {
		t.Fatal(err)
	}
	got, err := airgap.Listed(ctx, c.Address(), airgap.PauseImage, airgap.CoreDNSImage, airgap.BusyboxImage)
	if err != nil {
		t.Fatal(err)
	}
	for ref, ok := range got {
		if !ok {
			t.Errorf("%s missing after import", ref)
		}
	}
}
