package e2eimages

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k1m.dev/k1m/build/debian"
	"k1m.dev/k1m/build/images"
)

// DebianPackages make the shared Debian layer: what agnhost's image adds to
// Alpine (bind-tools, curl, netcat-openbsd, iproute2, iperf, bash), and the
// web servers of the httpd and nginx images.
var DebianPackages = []string{"apache2", "bind9-dnsutils", "ca-certificates", "curl", "iperf", "iproute2", "netcat-openbsd", "nginx"}

// Inputs are what the images are made from.
type Inputs struct {
	// Bin holds the programs: agnhost, nonewprivs, sample-apiserver, etcd.
	Bin string
	// CoreDNS is the coredns program agnhost and jessie-dnsutils carry.
	CoreDNS string
	// K8sDir is the k8s.io/kubernetes module's directory (test/images data).
	K8sDir string
	// Busybox is Debian's busybox-static binary.
	Busybox string
	// BashStatic is Debian's bash-static binary, the busybox image's sh.
	BashStatic string
	// Work holds the images' layers between builds.
	Work string
	// Debian holds the Debian root file system and its layer, named by
	// their packages (debian.Key), across builds and clones: the machine's
	// cache (k1m-build's CacheDir). Empty: Work.
	Debian string
	// Mirror is the Debian mirror debootstrap uses.
	Mirror string
	Log    io.Writer
}

// Build writes every image of Set into one docker archive at path; the
// Debian layer is stored once. The Debian root file system and its layer
// are kept in in.Debian and reused while DebianPackages stay the same.
func Build(in Inputs, path string) error {
	base, err := in.debianLayer()
	if err != nil {
		return err
	}
	var specs []images.Spec
	for _, img := range Set {
		fmt.Fprintf(in.Log, "e2e images: %s\n", strings.Join(img.Refs(), ", "))
		spec, err := in.spec(img, base)
		if err != nil {
			return fmt.Errorf("test image %s: %w", img.Name, err)
		}
		specs = append(specs, spec)
	}
	fmt.Fprintf(in.Log, "e2e images: writing %s\n", path)
	return images.WriteArchive(path, specs...)
}

// BuildImage writes the image of Set named name, which must need no
// Debian layer, alone into a docker archive at path: for a cluster that
// wants that image and not the whole set (the replicated database test's
// etcd).
func BuildImage(in Inputs, name, path string) error {
	i := slices.IndexFunc(Set, func(img Image) bool { return img.Name == name })
	if i < 0 {
		return fmt.Errorf("no test image %q in the set", name)
	}
	if Set[i].Kind == Debian {
		return fmt.Errorf("test image %s is built on the Debian layer: only the whole set is written (Build)", name)
	}
	spec, err := in.spec(Set[i], images.Layer{})
	if err != nil {
		return fmt.Errorf("test image %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(in.Log, "e2e images: writing %s alone to %s\n", strings.Join(Set[i].Refs(), ", "), path)
	return images.WriteArchive(path, spec)
}

func (in Inputs) spec(img Image, base images.Layer) (images.Spec, error) {
	spec := images.Spec{Tags: img.Refs()}
	top := filepath.Join(in.Work, "layers", img.Name+".tar")
	var layer images.Layer
	var err error
	switch img.Kind {
	case Debian:
		overlay := filepath.Join(in.Work, "overlay", img.Name)
		if spec.Config, err = in.fillOverlay(img.Name, overlay); err != nil {
			return spec, err
		}
		layer, err = images.DirLayer(overlay, top)
		spec.Layers = []images.Layer{base, layer}
	case Busybox:
		layer, err = in.busyboxLayer(top)
		spec.Config = images.Config{Cmd: []string{"sh"}}
		spec.Layers = []images.Layer{layer}
	case Scratch:
		var files map[string]string
		files, spec.Config = in.scratchFiles(img.Name)
		layer, err = images.FilesLayer(files, nil, top)
		spec.Layers = []images.Layer{layer}
	}
	return spec, err
}

// busyboxLayer lays busybox out as upstream's busybox image: the binary,
// its applet links, /etc/passwd and /etc/group, /tmp, /root, /home, /var.
// /bin/sh is busybox-sh (conformance/images/busybox-sh): busybox's ash,
// or Debian's bash-static when the environment holds variables whose names
// are not shell identifiers, which Debian's ash drops (upstream's passes
// them through; the ConfigMap and Secret "consumable via the environment"
// specs run `sh -c env` expecting data-1=value-1).
func (in Inputs) busyboxLayer(path string) (images.Layer, error) {
	links, err := images.BusyboxApplets(in.Busybox)
	if err != nil {
		return images.Layer{}, err
	}
	if _, err := os.Stat(in.BashStatic); err != nil {
		return images.Layer{}, fmt.Errorf("%w: the busybox test image runs Debian's bash-static for some commands (make deps-conformance installs it)", err)
	}
	delete(links, "/bin/sh")
	delete(links, "/bin/bash")
	etc := filepath.Join(filepath.Dir(path), "busybox-etc")
	o := &overlay{dir: etc}
	o.file("passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n", 0o644)
	o.file("group", "root:x:0:\nnogroup:x:65534:\n", 0o644)
	if o.err != nil {
		return images.Layer{}, o.err
	}
	files := map[string]string{
		"/bin/busybox": in.Busybox,
		"/bin/bash":    in.BashStatic,
		"/bin/sh":      filepath.Join(in.Bin, "busybox-sh"),
		"/etc/passwd":  filepath.Join(etc, "passwd"),
		"/etc/group":   filepath.Join(etc, "group"),
	}
	dirs := map[string]os.FileMode{"/tmp": os.ModeSticky | 0o777, "/root": 0o700, "/home": 0o755, "/var": 0o755, "/usr": 0o755}
	return images.DirsFilesLayer(dirs, files, links, path)
}

// scratchFiles are the files and config of the images made of one program.
func (in Inputs) scratchFiles(name string) (map[string]string, images.Config) {
	bin := func(n string) string { return filepath.Join(in.Bin, n) }
	switch name {
	case "nonewprivs":
		return map[string]string{"/usr/local/bin/nnp": bin("nonewprivs")}, images.Config{Cmd: []string{"nnp"}}
	case "sample-apiserver":
		return map[string]string{"/sample-apiserver": bin("sample-apiserver")}, images.Config{Entrypoint: []string{"/sample-apiserver"}}
	default: // etcd
		return map[string]string{"/usr/local/bin/etcd": bin("etcd")}, images.Config{Cmd: []string{"/usr/local/bin/etcd"}}
	}
}

// debianLayer makes (once) the Debian root file system and its layer.
func (in Inputs) debianLayer() (images.Layer, error) {
	key := debianKey()
	root := in.debianRoot()
	layerPath := filepath.Join(in.debianDir(), "layers", "debian-"+key+".tar")
	idPath := layerPath + ".diffid"
	if id, err := os.ReadFile(idPath); err == nil {
		if _, err := os.Stat(layerPath); err == nil {
			fmt.Fprintf(in.Log, "e2e images: Debian layer %s cached\n", key)
			return images.Layer{Path: layerPath, DiffID: strings.TrimSpace(string(id))}, nil
		}
	}
	if err := in.debootstrap(root); err != nil {
		return images.Layer{}, err
	}
	fmt.Fprintf(in.Log, "e2e images: writing the Debian layer\n")
	layer, err := images.DirLayer(root, layerPath)
	if err != nil {
		return layer, err
	}
	return layer, os.WriteFile(idPath, []byte(layer.DiffID+"\n"), 0o644)
}

// debianDir holds the Debian tree and its layer.
func (in Inputs) debianDir() string {
	if in.Debian != "" {
		return in.Debian
	}
	return in.Work
}

// debianRoot is the Debian tree.
func (in Inputs) debianRoot() string { return filepath.Join(in.debianDir(), "debian-"+debianKey()) }

// debianKey names the Debian tree after what goes into it.
func debianKey() string { return debian.Key(DebianPackages) }

func (in Inputs) debootstrap(root string) error {
	return debian.Bootstrap(root, DebianPackages, in.Mirror, "e2e images", in.Log)
}
