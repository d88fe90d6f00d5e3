package tool

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"k1m.dev/k1m/build/apply"
	"k1m.dev/k1m/build/kindimage"
	"k1m.dev/k1m/build/stamp"
	"k1m.dev/k1m/pkg/fsutil"
)

// crictlVersion is the newest cri-tools the module proxy serves whole
// (v1.32 is not); crictl speaks CRI v1, which containerd 1.6 serves.
const crictlVersion = "v1.30.0"

// kindTools builds into OUT/kind/bin what the kind images and clusters
// need besides the k1m build: the kind CLI (KIND_VERSION, from its
// module), k1m-docker-runc, k1m-cni, etcd and crictl.
func (p project) kindTools() error {
	bin := filepath.Join(p.out, "kind", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	kindVersion, err := p.pin("KIND_VERSION")
	if err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: building the kind CLI %s from its module\n", kindVersion)
	if err := p.goRun(exec.Command("go", "install", "-v", "-trimpath", "-ldflags=-s -w", "sigs.k8s.io/kind@"+kindVersion), bin); err != nil {
		return fmt.Errorf("building kind %s: %w", kindVersion, err)
	}
	if err := p.goRun(exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(bin, "k1m-docker-runc"), "./test/cmd/k1m-docker-runc"), ""); err != nil {
		return err
	}
	for _, s := range []struct {
		flavor stamp.Flavor
		out    string
		pkg    string
	}{
		{stamp.K1m, "k1m-cni", "./cmd/k1m-cni"},
		{stamp.Stock, "etcd", "./conformance/images/etcd"},
	} {
		ldflags, err := p.ldflagsFor(s.flavor)
		if err != nil {
			return err
		}
		cmd, err := p.goCmd(s.flavor, []string{"build", "-v", "-ldflags", ldflags, "-o", filepath.Join(bin, s.out), s.pkg})
		if err != nil {
			return err
		}
		if err := runWithProgress(cmd, p.log, s.out); err != nil {
			return fmt.Errorf("building %s: %w", s.out, err)
		}
	}
	return p.crictl(bin)
}

// crictl builds crictl from a writable copy of the cri-tools module (its
// go.mod has replace directives, so `go install mod@version` refuses it).
func (p project) crictl(bin string) error {
	out := filepath.Join(bin, "crictl")
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	fmt.Fprintf(p.log, "k1m-build: building crictl %s from its module\n", crictlVersion)
	mod := apply.Module{Path: "sigs.k8s.io/cri-tools", Version: crictlVersion}
	if err := apply.Download(&mod); err != nil {
		return err
	}
	src := filepath.Join(p.out, "kind", "work", "cri-tools")
	if err := os.RemoveAll(src); err != nil {
		return err
	}
	if err := fsutil.CopyTree(mod.Dir, src, func(string) os.FileMode { return 0o644 }); err != nil {
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-mod=mod", "-trimpath", "-ldflags=-s -w", "-o", abs, "./cmd/crictl")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	return runWithProgress(cmd, p.log, "crictl")
}

// kindImage builds the base and node images (kindimage) and loads them
// into Docker, unless the loaded node image was built from the same inputs.
func (p project) kindImage() error {
	kindVersion, err := p.pin("KIND_VERSION")
	if err != nil {
		return err
	}
	kindMod := apply.Module{Path: "sigs.k8s.io/kind", Version: kindVersion}
	if err := apply.Download(&kindMod); err != nil {
		return err
	}
	tools := filepath.Join(p.out, "kind", "bin")
	bin := filepath.Join(p.out, "bin")
	for _, f := range []string{filepath.Join(tools, "k1m-cni"), filepath.Join(tools, "etcd"), filepath.Join(tools, "crictl"), filepath.Join(bin, "kubeadm")} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w: build it first (make kind-image runs make build and k1m-build kind-tools)", err)
		}
	}
	version, err := exec.Command(filepath.Join(bin, "kubeadm"), "version", "-o", "short").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", filepath.Join(bin, "kubeadm"), err)
	}
	work, err := filepath.Abs(filepath.Join(p.out, "kind", "work"))
	if err != nil {
		return err
	}
	cache, err := CacheDir()
	if err != nil {
		return err
	}
	in := kindimage.Inputs{KindDir: kindMod.Dir, Work: work, Base: filepath.Join(cache, "kind-base"), Mirror: debianMirror(), Log: p.log}
	node := kindimage.Node{Version: strings.TrimSpace(string(version)), Bin: bin, CNI: filepath.Join(tools, "k1m-cni"),
		Etcd: filepath.Join(tools, "etcd"), Crictl: filepath.Join(tools, "crictl"), ImageDir: filepath.Join(p.out, "images")}
	hash, err := in.InputsHash(node)
	if err != nil {
		return err
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("no Docker engine answers (%s): make kind-image starts one (hack/docker.sh up)", strings.TrimSpace(string(out)))
	}
	ref := kindimage.NodeRef(node.Version)
	if loaded, _ := exec.Command("docker", "image", "inspect", "-f", `{{index .Config.Labels "`+kindimage.InputsLabel+`"}}`, ref).Output(); strings.TrimSpace(string(loaded)) == hash {
		fmt.Fprintf(p.log, "k1m-build: %s is up to date (inputs %s)\n", ref, hash)
		return nil
	}
	// The base image is loaded too (test/release runs it) unless the one
	// loaded holds exactly this base layer.
	diffID, err := in.BaseDiffID()
	if err != nil {
		return err
	}
	loadedBase, _ := exec.Command("docker", "image", "inspect", "-f", `{{join .RootFS.Layers " "}}`, in.BaseRef()).Output()
	haveBase := strings.TrimSpace(string(loadedBase)) == "sha256:"+strings.TrimPrefix(diffID, "sha256:")
	base, nodeArchive, err := in.Build(node, hash, !haveBase)
	if err != nil {
		return err
	}
	for _, archive := range []string{base, nodeArchive} {
		if archive == "" {
			continue
		}
		fmt.Fprintf(p.log, "k1m-build: docker load -i %s\n", archive)
		cmd := exec.Command("docker", "load", "-i", archive)
		cmd.Stdout, cmd.Stderr = p.log, p.log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("docker load -i %s: %w (is dockerd running? make kind-image starts it)", archive, err)
		}
		if err := os.Remove(archive); err != nil {
			return err
		}
	}
	fmt.Fprintf(p.log, "k1m-build: kind node image %s (also %s:latest)\n", ref, kindimage.NodeRepo)
	p.removeStaleKindImages(kindimage.Tag(node.Version), in.BaseKey())
	return nil
}

// removeStaleKindImages removes the node and base images earlier builds
// loaded (a node image per commit, 1 GB each, filled the disk of a
// developer's machine and CI's), and node images no tag names any more.
// An image a container still uses stays (docker rmi refuses); failures
// only cost disk, so they are reported, not returned.
func (p project) removeStaleKindImages(nodeTag, baseTag string) {
	for _, repo := range []struct{ name, keep string }{{kindimage.NodeRepo, nodeTag}, {kindimage.BaseRepo, baseTag}} {
		out, err := exec.Command("docker", "image", "ls", repo.name, "--format", "{{.Tag}}").Output()
		if err != nil {
			fmt.Fprintf(p.log, "k1m-build: listing %s images: %v\n", repo.name, err)
			continue
		}
		for _, tag := range staleTags(strings.Fields(string(out)), repo.keep, "latest") {
			if out, err := exec.Command("docker", "rmi", repo.name+":"+tag).CombinedOutput(); err != nil {
				fmt.Fprintf(p.log, "k1m-build: keeping %s:%s: %s\n", repo.name, tag, strings.TrimSpace(string(out)))
			} else {
				fmt.Fprintf(p.log, "k1m-build: removed the stale image %s:%s\n", repo.name, tag)
			}
		}
	}
	if out, err := exec.Command("docker", "image", "prune", "-f", "--filter", "label="+kindimage.InputsLabel).CombinedOutput(); err != nil {
		fmt.Fprintf(p.log, "k1m-build: pruning untagged node images: %s\n", strings.TrimSpace(string(out)))
	}
}

// staleTags are the tags not kept.
func staleTags(tags []string, keep ...string) []string {
	var stale []string
	for _, t := range tags {
		if t != "<none>" && !slices.Contains(keep, t) {
			stale = append(stale, t)
		}
	}
	return stale
}

// debianMirror is K1M_DEBIAN_MIRROR or Debian's own.
func debianMirror() string {
	if m := os.Getenv("K1M_DEBIAN_MIRROR"); m != "" {
		return m
	}
	return "http://deb.debian.org/debian"
}

// pin reads one version from build/versions.env.
func (p project) pin(name string) (string, error) {
	pins, err := p.pins()
	if err != nil {
		return "", err
	}
	return pins.Get(name)
}
