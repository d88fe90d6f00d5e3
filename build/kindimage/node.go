package kindimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k1m.dev/k1m/build/debian"
	"k1m.dev/k1m/build/images"
)

// Image names. The base and node repositories are k1m's; the preloaded
// images keep upstream's names, so kubeadm's manifests find them.
const (
	BaseRepo = "k1m.local/kind-base"
	NodeRepo = "k1m.local/kind-node"
	CNIRepo  = "k1m.local/k1m-cni"
	// InputsLabel carries the hash of everything the node image is made
	// of: a build whose inputs hash the same keeps the loaded image.
	InputsLabel = "dev.k1m.inputs"
)

// Node is what goes into the node image beyond the base.
type Node struct {
	Version  string // the patched kubeadm's version, e.g. v1.32.5+k1m.0123abcd4567
	Bin      string // kubelet, kubeadm, kubectl and the control-plane binaries (k1m flavour)
	CNI      string // the k1m-cni binary
	Etcd     string // the etcd binary (v3.5.16)
	Crictl   string // crictl, for `kind load` and `kind export logs`
	ImageDir string // pause.tar, coredns.tar, local-path-provisioner.tar, busybox.tar and metrics-server.tar (make images)
}

// Tag is the image tag kubeadm derives from a version ("+" is not allowed
// in a tag).
func Tag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// NodeRef is the node image's name for a version.
func NodeRef(version string) string { return NodeRepo + ":" + Tag(version) }

// inputFiles are the files on disk the node layer is made of (generated
// files aside).
func (n Node) inputFiles() map[string]string {
	b := func(name string) string { return filepath.Join(n.Bin, name) }
	return map[string]string{
		"/usr/bin/kubelet":                        b("kubelet"),
		"/usr/bin/kubeadm":                        b("kubeadm"),
		"/usr/bin/kubectl":                        b("kubectl"),
		"/usr/local/bin/crictl":                   n.Crictl,
		"/kind/images/pause.tar":                  filepath.Join(n.ImageDir, "pause.tar"),
		"/kind/images/coredns.tar":                filepath.Join(n.ImageDir, "coredns.tar"),
		"/kind/images/local-path-provisioner.tar": filepath.Join(n.ImageDir, "local-path-provisioner.tar"),
		"/kind/images/busybox.tar":                filepath.Join(n.ImageDir, "busybox.tar"),
		"/kind/images/metrics-server.tar":         filepath.Join(n.ImageDir, "metrics-server.tar"),
		"/kind/images/control-plane.tar":          "", // written by Build
	}
}

// InputsHash hashes the base key, the version, the content of every input
// file, the generated files and the images' package lists: what decides whether a loaded node image
// is current. Content, not modification times: make build and make images
// rewrite unchanged outputs.
func (in Inputs) InputsHash(n Node) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", in.BaseKey(), n.Version)
	paths := []string{filepath.Join(n.Bin, "kube-apiserver"), filepath.Join(n.Bin, "kube-controller-manager"),
		filepath.Join(n.Bin, "kube-scheduler"), filepath.Join(n.Bin, "kube-proxy"), n.CNI, n.Etcd}
	for _, disk := range n.inputFiles() {
		if disk != "" {
			paths = append(paths, disk)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := hashFile(h, p); err != nil {
			return "", err
		}
	}
	for _, g := range generatedFiles(n) {
		fmt.Fprintf(h, "%s %d %s\n", g.path, g.mode, g.data)
	}
	fmt.Fprintf(h, "%s\n", iptablesWrapper)
	// The images' userland packages, taken from the base tree.
	fmt.Fprintf(h, "%s\n%s\n", strings.Join(proxyPackages, " "), strings.Join(cniPackages, " "))
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\n", path)
	_, err = io.Copy(h, f)
	return err
}

type generated struct {
	path string
	mode os.FileMode
	data string
}

// generatedFiles are the node layer's files written from this package.
func generatedFiles(n Node) []generated {
	return []generated{
		{"/kind/version", 0o644, n.Version + "\n"},
		{"/kind/manifests/default-cni.yaml", 0o644, CNIManifest(CNIRepo + ":" + Tag(n.Version))},
		{"/kind/manifests/default-storage.yaml", 0o644, StorageManifest() + "---\n" + MetricsServerManifest()},
		{"/kind/k1m/etcd-nofsync.yaml", 0o644, NoFsyncEtcdPod()},
		{"/etc/systemd/system/k1m-preload-images.service", 0o644, preloadUnit},
		{"/etc/systemd/system/kubelet.service.d/20-k1m-preload.conf", 0o644, kubeletAfterPreload},
		{"/etc/systemd/system/k1m-etcd-nofsync.path", 0o644, etcdNoFsyncPath},
		{"/etc/systemd/system/k1m-etcd-nofsync.service", 0o644, etcdNoFsyncService},
	}
}

// nodeSymlinks enable the k1m units (what `systemctl enable` writes).
var nodeSymlinks = map[string]string{
	"/etc/systemd/system/multi-user.target.wants/k1m-preload-images.service": "/etc/systemd/system/k1m-preload-images.service",
	"/etc/systemd/system/multi-user.target.wants/k1m-etcd-nofsync.path":      "/etc/systemd/system/k1m-etcd-nofsync.path",
}

// BaseDiffID is the diff ID of the base layer node images are built on,
// written once per base key beside the layer: a base image loaded from
// another base directory (a build without the shared cache, on the same
// Docker engine) has the same name but may hold other bytes.
func (in Inputs) BaseDiffID() (string, error) {
	root, err := in.BaseRoot()
	if err != nil {
		return "", err
	}
	layer, err := in.baseLayer(root)
	return layer.DiffID, err
}

// BaseRef is the base image's name.
func (in Inputs) BaseRef() string { return BaseRepo + ":" + in.BaseKey() }

// Build writes the node image's archive (base layer + node layer) under
// in.Work and, with withBase, the base image's archive; it returns their
// paths ("" for a base archive not written).
func (in Inputs) Build(n Node, inputsHash string, withBase bool) (baseArchive, nodeArchive string, err error) {
	root, err := in.BaseRoot()
	if err != nil {
		return "", "", err
	}
	base, err := in.baseLayer(root)
	if err != nil {
		return "", "", err
	}
	if withBase {
		baseArchive = filepath.Join(in.Work, "kind-base.tar")
		baseSpec := images.Spec{Tags: []string{in.BaseRef()}, Config: nodeConfig(), Layers: []images.Layer{base}}
		fmt.Fprintf(in.Log, "kind image: writing %s (%s)\n", baseArchive, baseSpec.Tags[0])
		if err := images.WriteArchive(baseArchive, baseSpec); err != nil {
			return "", "", err
		}
	}
	cp := filepath.Join(in.Work, "node", "control-plane.tar")
	if err := in.controlPlaneImages(root, n, cp); err != nil {
		return "", "", err
	}
	layer, err := in.nodeLayer(n, cp)
	if err != nil {
		return "", "", err
	}
	nodeArchive = filepath.Join(in.Work, "kind-node.tar")
	cfg := nodeConfig()
	cfg.Labels = map[string]string{InputsLabel: inputsHash}
	nodeSpec := images.Spec{Tags: []string{NodeRef(n.Version), NodeRepo + ":latest"}, Config: cfg, Layers: []images.Layer{base, layer}}
	fmt.Fprintf(in.Log, "kind image: writing %s (%s)\n", nodeArchive, nodeSpec.Tags[0])
	return baseArchive, nodeArchive, images.WriteArchive(nodeArchive, nodeSpec)
}

// nodeConfig is kindest/base's image config: kind's entrypoint, then
// systemd as PID 1, stopped with SIGRTMIN+3.
func nodeConfig() images.Config {
	return images.Config{
		Entrypoint: []string{"/usr/local/bin/entrypoint", "/sbin/init"},
		Env:        []string{"container=docker"},
		StopSignal: "SIGRTMIN+3",
	}
}

// baseLayer writes (once per base key) the base tree as a layer.
func (in Inputs) baseLayer(root string) (images.Layer, error) {
	path := filepath.Join(in.baseDir(), "layers", "kind-base-"+in.BaseKey()+".tar")
	idPath := path + ".diffid"
	if id, err := os.ReadFile(idPath); err == nil {
		if _, err := os.Stat(path); err == nil {
			fmt.Fprintf(in.Log, "kind image: base layer %s cached\n", in.BaseKey())
			return images.Layer{Path: path, DiffID: strings.TrimSpace(string(id))}, nil
		}
	}
	fmt.Fprintf(in.Log, "kind image: writing the base layer\n")
	layer, err := images.DirLayer(root, path)
	if err != nil {
		return layer, err
	}
	return layer, os.WriteFile(idPath, []byte(layer.DiffID+"\n"), 0o644)
}

// nodeLayer holds the binaries, the preloaded images, kind's manifests and
// k1m's units.
func (in Inputs) nodeLayer(n Node, controlPlane string) (images.Layer, error) {
	dir := filepath.Join(in.Work, "node", "generated")
	if err := os.RemoveAll(dir); err != nil {
		return images.Layer{}, err
	}
	files := n.inputFiles()
	files["/kind/images/control-plane.tar"] = controlPlane
	for _, g := range generatedFiles(n) {
		disk := filepath.Join(dir, g.path)
		if err := writeFile(disk, g.data, g.mode); err != nil {
			return images.Layer{}, err
		}
		files[g.path] = disk
	}
	fmt.Fprintf(in.Log, "kind image: writing the node layer\n")
	return images.FilesLayer(files, nodeSymlinks, filepath.Join(in.Work, "layers", "kind-node.tar"))
}

// controlPlaneImages writes the images kubeadm and kind run: kube-apiserver,
// kube-controller-manager, kube-scheduler and kube-proxy (k1m build, tagged
// as kubeadm expects for the version), etcd and k1m-cni. kube-proxy gets
// the iptables userland from the base tree's Debian packages.
func (in Inputs) controlPlaneImages(root string, n Node, path string) error {
	layers := filepath.Join(in.Work, "node", "layers")
	tag := Tag(n.Version)
	var specs []images.Spec
	one := func(ref, name, disk string) error {
		layer, err := images.FilesLayer(map[string]string{"/usr/local/bin/" + name: disk}, nil, filepath.Join(layers, name+".tar"))
		if err != nil {
			return err
		}
		specs = append(specs, images.Spec{Tags: []string{ref}, Config: images.Config{Entrypoint: []string{"/usr/local/bin/" + name}}, Layers: []images.Layer{layer}})
		return nil
	}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := one("registry.k8s.io/"+c+":"+tag, c, filepath.Join(n.Bin, c)); err != nil {
			return err
		}
	}
	if err := one(EtcdImage, "etcd", n.Etcd); err != nil {
		return err
	}
	nft, err := packagesLayer(root, filepath.Join(layers, "nftables.tar"), cniPackages, nil, nil)
	if err != nil {
		return err
	}
	cni, err := images.FilesLayer(map[string]string{"/usr/local/bin/k1m-cni": n.CNI}, nil, filepath.Join(layers, "k1m-cni.tar"))
	if err != nil {
		return err
	}
	specs = append(specs, images.Spec{Tags: []string{CNIRepo + ":" + tag}, Config: images.Config{Entrypoint: []string{"/usr/local/bin/k1m-cni"}},
		Layers: []images.Layer{nft, cni}})
	userland, err := iptablesLayer(root, filepath.Join(layers, "iptables.tar"), filepath.Join(in.Work, "node", "iptables-wrapper"))
	if err != nil {
		return err
	}
	proxy, err := images.FilesLayer(map[string]string{"/usr/local/bin/kube-proxy": filepath.Join(n.Bin, "kube-proxy")}, nil, filepath.Join(layers, "kube-proxy.tar"))
	if err != nil {
		return err
	}
	specs = append(specs, images.Spec{Tags: []string{"registry.k8s.io/kube-proxy:" + tag},
		Config: images.Config{Entrypoint: []string{"/usr/local/bin/kube-proxy"}}, Layers: []images.Layer{userland, proxy}})
	fmt.Fprintf(in.Log, "kind image: writing the control-plane images (%s)\n", tag)
	return images.WriteArchive(path, specs...)
}

// proxyPackages are what kube-proxy runs besides itself: iptables and
// ip6tables (legacy and nft), conntrack, and busybox for the wrapper
// (KIND_PROXY_PACKAGES of build/debian/packages.env).
var proxyPackages = debian.Packages("KIND_PROXY_PACKAGES")

// cniPackages are what k1m-cni runs besides itself: nft
// (KIND_CNI_PACKAGES of build/debian/packages.env).
var cniPackages = debian.Packages("KIND_CNI_PACKAGES")

// iptablesLayer is the kube-proxy image's userland: the files of
// proxyPackages and their dependencies from the base tree, with the
// iptables commands pointing at the backend-picking wrapper.
func iptablesLayer(root, path, wrapper string) (images.Layer, error) {
	if err := writeFile(wrapper, iptablesWrapper, 0o755); err != nil {
		return images.Layer{}, err
	}
	links := map[string]string{}
	for _, cmd := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		links["/usr/sbin/"+cmd] = "iptables-wrapper"
	}
	return packagesLayer(root, path, proxyPackages, map[string]string{"/usr/sbin/iptables-wrapper": wrapper}, links)
}

// packagesLayer is a layer of the files of packages and their
// dependencies from the base tree, plus extra files and links.
func packagesLayer(root, path string, packages []string, extraFiles, extraLinks map[string]string) (images.Layer, error) {
	pkgs, err := debian.Closure(root, packages)
	if err != nil {
		return images.Layer{}, err
	}
	files, links, err := debian.Files(root, pkgs)
	if err != nil {
		return images.Layer{}, err
	}
	maps.Copy(files, extraFiles)
	maps.Copy(links, extraLinks)
	// Programs find their libraries through the loader's usual paths; the
	// base tree's usrmerge links make /lib and /bin the /usr ones.
	for _, l := range []string{"/lib", "/lib64", "/bin", "/sbin"} {
		if target, err := os.Readlink(filepath.Join(root, l)); err == nil {
			links[l] = target
		}
	}
	return images.FilesLayer(files, links, path)
}
