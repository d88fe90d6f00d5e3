package tool

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k1m.dev/k1m/build/images"
	"k1m.dev/k1m/pkg/airgap"
)

// busyboxPath is Debian's busybox-static (hack/install-deps.sh cluster).
const busyboxPath = "/bin/busybox"

// images builds the image archives a cluster imports at start into
// OUT/images: pause (from cmd/k1m-pause), CoreDNS (from the coredns module
// at its pinned version) and busybox (from Debian's busybox-static).
func (p project) images() error {
	dir := filepath.Join(p.out, "images")
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	pins, err := p.pins()
	if err != nil {
		return err
	}
	corednsVersion, err := pins.Get("COREDNS_VERSION")
	if err != nil {
		return err
	}
	if corednsVersion != airgap.CoreDNSVersion {
		return fmt.Errorf("build/versions.env pins CoreDNS %s but pkg/airgap names %s: change both", corednsVersion, airgap.CoreDNSVersion)
	}
	fmt.Fprintf(p.log, "k1m-build: building the pause program\n")
	if err := p.goRun(exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(binDir, "pause"), "./cmd/k1m-pause"), ""); err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: building CoreDNS %s from its module (the first build downloads its dependencies)\n", corednsVersion)
	install := exec.Command("go", "install", "-v", "-trimpath", "-ldflags=-s -w", "github.com/coredns/coredns@"+corednsVersion)
	if err := p.goRun(install, binDir); err != nil {
		return fmt.Errorf("building CoreDNS %s: %w", corednsVersion, err)
	}
	applets, err := images.BusyboxApplets(busyboxPath)
	if err != nil {
		return err
	}
	set := []struct {
		file string
		img  images.Image
	}{
		{"pause.tar", images.Image{Ref: airgap.PauseImage, Files: map[string]string{"/pause": filepath.Join(binDir, "pause")}, Entrypoint: []string{"/pause"}, User: "65535:65535"}},
		{"coredns.tar", images.Image{Ref: airgap.CoreDNSImage, Files: map[string]string{"/coredns": filepath.Join(binDir, "coredns")}, Entrypoint: []string{"/coredns"}}},
		{"busybox.tar", images.Image{Ref: airgap.BusyboxImage, Files: map[string]string{"/bin/busybox": busyboxPath}, Symlinks: applets, Cmd: []string{"sh"}}},
	}
	for _, s := range set {
		path := filepath.Join(dir, s.file)
		if err := images.Write(s.img, path); err != nil {
			return err
		}
		fmt.Fprintf(p.log, "k1m-build: wrote %s (%s)\n", path, s.img.Ref)
	}
	return nil
}

// goRun runs a plain go command (outside both flavours: these programs do
// not link Kubernetes) with progress lines; gobin, when set, is GOBIN.
func (p project) goRun(cmd *exec.Cmd, gobin string) error {
	cmd.Dir = p.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if gobin != "" {
		abs, err := filepath.Abs(gobin)
		if err != nil {
			return err
		}
		cmd.Env = append(cmd.Env, "GOBIN="+abs)
	}
	return runWithProgress(cmd, p.log, filepath.Base(cmd.Args[len(cmd.Args)-1]))
}
