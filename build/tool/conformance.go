package tool

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/build/e2eimages"
	"k1m.dev/k1m/build/images"
	"k1m.dev/k1m/build/stamp"
	"k1m.dev/k1m/conformance"
)

// bashStaticPath is Debian's bash-static (hack/install-deps.sh conformance).
const bashStaticPath = "/bin/bash-static"

// conformancePrograms are built in the stock flavour: the suite and its
// images come from unpatched v1.32.5 sources, so they test k1m rather than
// share its patches. Binary names are the last path element.
var conformancePrograms = []string{
	"k8s.io/kubernetes/cmd/kubectl",
	"k8s.io/kubernetes/test/conformance/image/go-runner",
	"k8s.io/kubernetes/test/images/agnhost",
	"k8s.io/kubernetes/test/images/nonewprivs",
	"k8s.io/sample-apiserver",
	"./conformance/images/etcd",
	"./conformance/images/busybox-sh",
	"./conformance/cmd/k1m-conformance",
}

// conformance builds what a conformance run needs into OUT/conformance:
// bin/ (e2e.test, ginkgo, kubectl, go-runner, the test images' programs),
// images/conformance.tar (the conformance image), images/e2e-test-images.tar
// (every test image the [Conformance] specs use), database/etcd.tar (the
// etcd image alone, for test/database) and repo-list.yaml.
func (p project) conformance() error {
	if err := p.checkConformanceTag(); err != nil {
		return err
	}
	dir := filepath.Join(p.out, "conformance")
	bin := filepath.Join(dir, "bin")
	imgDir := filepath.Join(dir, "images")
	for _, d := range []string{bin, imgDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := p.conformanceBinaries(bin); err != nil {
		return err
	}
	// Upstream's nonewprivs image has nnp setuid root: the spec checks that
	// no_new_privs keeps it from raising the effective uid.
	if err := os.Chmod(filepath.Join(bin, "nonewprivs"), 0o4755); err != nil {
		return err
	}
	coredns := filepath.Join(p.out, "images", "bin", "coredns")
	if _, err := os.Stat(coredns); err != nil {
		return fmt.Errorf("%w: build the node images first (make images)", err)
	}
	mirror := debianMirror()
	k8sDir, err := p.moduleDir("k8s.io/kubernetes")
	if err != nil {
		return err
	}
	work, err := filepath.Abs(filepath.Join(dir, "work")) // debootstrap changes directory
	if err != nil {
		return err
	}
	cache, err := CacheDir()
	if err != nil {
		return err
	}
	in := e2eimages.Inputs{Bin: bin, CoreDNS: coredns, K8sDir: k8sDir, Busybox: busyboxPath, BashStatic: bashStaticPath,
		Work: work, Debian: filepath.Join(cache, "e2e-debian"), Mirror: mirror, Log: p.log}
	if err := e2eimages.Build(in, filepath.Join(imgDir, "e2e-test-images.tar")); err != nil {
		return err
	}
	// The replicated database test's etcd alone: make upgrade-test imports
	// it without the rest of the set.
	if err := e2eimages.BuildImage(in, "etcd", filepath.Join(dir, "database", "etcd.tar")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "repo-list.yaml"), []byte(e2eimages.RepoList()), 0o644); err != nil {
		return err
	}
	if err := p.conformanceImage(bin, filepath.Join(imgDir, "conformance.tar")); err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: conformance pieces in %s (images/*.tar, repo-list.yaml, bin/)\n", dir)
	return nil
}

func (p project) conformanceBinaries(bin string) error {
	ldflags, err := p.ldflagsFor(stamp.Stock)
	if err != nil {
		return err
	}
	steps := []struct {
		label string
		args  []string
	}{
		{"conformance programs", append([]string{"build", "-v", "-ldflags", ldflags, "-o", bin + "/"}, conformancePrograms...)},
		{"e2e.test", []string{"test", "-c", "-v", "-ldflags", ldflags, "-o", filepath.Join(bin, "e2e.test"), "k8s.io/kubernetes/test/e2e"}},
	}
	for _, s := range steps {
		fmt.Fprintf(p.log, "k1m-build: building %s (stock v1.32.5 sources)\n", s.label)
		cmd, err := p.goCmd(stamp.Stock, s.args)
		if err != nil {
			return err
		}
		if err := runWithProgress(cmd, p.log, s.label); err != nil {
			return fmt.Errorf("building %s: %w", s.label, err)
		}
	}
	pins, err := p.pins()
	if err != nil {
		return err
	}
	ginkgo, err := pins.Get("GINKGO_VERSION")
	if err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: building the ginkgo CLI %s\n", ginkgo)
	return p.goRun(exec.Command("go", "install", "-v", "-trimpath", "-ldflags=-s -w", "github.com/onsi/ginkgo/v2/ginkgo@"+ginkgo), bin)
}

// conformanceImage lays the programs out as registry.k8s.io/conformance
// does (go-runner as kubeconformance, /gorunner and /run_e2e.sh; ginkgo,
// e2e.test, kubectl in /usr/local/bin; its default environment), on
// busybox so that `kubectl cp` and a debugging shell work, plus
// k1m-conformance, whose `worker` plays Sonobuoy's sidecar.
func (p project) conformanceImage(bin, path string) error {
	work := filepath.Join(filepath.Dir(path), "..", "work")
	base, err := images.BusyboxLayer(busyboxPath, filepath.Join(work, "layers", "busybox.tar"))
	if err != nil {
		return err
	}
	b := func(n string) string { return filepath.Join(bin, n) }
	files := map[string]string{
		"/usr/local/bin/ginkgo":          b("ginkgo"),
		"/usr/local/bin/e2e.test":        b("e2e.test"),
		"/usr/local/bin/kubectl":         b("kubectl"),
		"/usr/local/bin/kubeconformance": b("go-runner"),
		"/usr/local/bin/k1m-conformance": b("k1m-conformance"),
		"/gorunner":                      b("go-runner"),
		"/run_e2e.sh":                    b("go-runner"),
	}
	top, err := images.FilesLayer(files, nil, filepath.Join(work, "layers", "conformance.tar"))
	if err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: writing %s (%s)\n", path, conformance.Image)
	return images.WriteArchive(path, images.Spec{
		Tags: []string{conformance.Image},
		Config: images.Config{
			Entrypoint: []string{"kubeconformance"},
			Env: []string{`E2E_FOCUS=\[Conformance\]`, "E2E_SKIP=", "E2E_PROVIDER=local", "E2E_PARALLEL=1",
				"E2E_VERBOSITY=4", "RESULTS_DIR=/tmp/results", "KUBECONFIG="},
		},
		Layers: []images.Layer{base, top},
	})
}

// moduleDir is where the module cache holds a module of the stock build.
func (p project) moduleDir(module string) (string, error) {
	cmd, err := p.goCmd(stamp.Stock, []string{"list", "-m", "-f", "{{.Dir}}", module})
	if err != nil {
		return "", err
	}
	cmd.Stderr = p.log
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkConformanceTag keeps the conformance image's tag on the pinned
// Kubernetes version.
func (p project) checkConformanceTag() error {
	pins, err := p.pins()
	if err != nil {
		return err
	}
	version, err := pins.Get("KUBERNETES_VERSION")
	if err != nil {
		return err
	}
	if !strings.HasSuffix(conformance.Image, ":"+version) {
		return fmt.Errorf("build/versions.env pins Kubernetes %s but conformance names image %s: change both", version, conformance.Image)
	}
	return nil
}
