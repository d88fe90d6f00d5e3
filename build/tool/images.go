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

// moduleProgram is a program of a packaged component, built from its Go
// module at the version build/versions.env pins, which pkg/airgap must
// name too (the manifests run the image of that version).
type moduleProgram struct {
	pin, airgapVersion string
	pkg, binary        string // go install's package path (without @version) and its binary
}

// modulePrograms are the packaged components' programs.
var modulePrograms = []moduleProgram{
	{"COREDNS_VERSION", airgap.CoreDNSVersion, "github.com/coredns/coredns", "coredns"},
	{"LOCAL_PATH_PROVISIONER_VERSION", airgap.LocalPathProvisionerVersion, "github.com/rancher/local-path-provisioner", "local-path-provisioner"},
	{"METRICS_SERVER_VERSION", airgap.MetricsServerVersion, "sigs.k8s.io/metrics-server/cmd/metrics-server", "metrics-server"},
}

// images builds the image archives a cluster imports at start into
// OUT/images: pause (from cmd/k1m-pause), the packaged components (each
// from its module at its pinned version) and busybox (from Debian's
// busybox-static).
func (p project) images() error {
	dir := filepath.Join(p.out, "images")
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: building the pause program\n")
	if err := p.goRun(exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(binDir, "pause"), "./cmd/k1m-pause"), ""); err != nil {
		return err
	}
	for _, m := range modulePrograms {
		if err := p.buildModuleProgram(m, binDir); err != nil {
			return err
		}
	}
	applets, err := images.BusyboxApplets(busyboxPath)
	if err != nil {
		return err
	}
	bin := func(name string) string { return filepath.Join(binDir, name) }
	set := []struct {
		file string
		img  images.Image
	}{
		{"pause.tar", images.Image{Ref: airgap.PauseImage, Files: map[string]string{"/pause": bin("pause")}, Entrypoint: []string{"/pause"}, User: "65535:65535"}},
		{"coredns.tar", images.Image{Ref: airgap.CoreDNSImage, Files: map[string]string{"/coredns": bin("coredns")}, Entrypoint: []string{"/coredns"}}},
		// Upstream's image puts the program on PATH; its manifests call it by name.
		{"local-path-provisioner.tar", images.Image{Ref: airgap.LocalPathProvisionerImage,
			Files: map[string]string{"/usr/bin/local-path-provisioner": bin("local-path-provisioner")}, Entrypoint: []string{"/usr/bin/local-path-provisioner"}}},
		{"metrics-server.tar", images.Image{Ref: airgap.MetricsServerImage, Files: map[string]string{"/metrics-server": bin("metrics-server")}, Entrypoint: []string{"/metrics-server"}}},
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

// buildModuleProgram installs m's binary into binDir.
func (p project) buildModuleProgram(m moduleProgram, binDir string) error {
	pins, err := p.pins()
	if err != nil {
		return err
	}
	version, err := pins.Get(m.pin)
	if err != nil {
		return err
	}
	if version != m.airgapVersion {
		return fmt.Errorf("build/versions.env pins %s=%s but pkg/airgap names %s: change both", m.pin, version, m.airgapVersion)
	}
	fmt.Fprintf(p.log, "k1m-build: building %s %s from its module (the first build downloads its dependencies)\n", m.binary, version)
	install := exec.Command("go", "install", "-v", "-trimpath", "-ldflags=-s -w", m.pkg+"@"+version)
	if err := p.goRun(install, binDir); err != nil {
		return fmt.Errorf("building %s %s: %w", m.binary, version, err)
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
