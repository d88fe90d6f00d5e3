// Package kindimage builds k1m's kind images offline: a base image laid out
// like kind's own (kindest/base: systemd, containerd, runc, CNI plugins and
// kind's entrypoint and units, taken from the sigs.k8s.io/kind module) from
// a Debian bookworm debootstrap, and a node image on it with the patched
// kubelet, kubeadm and kubectl and the control-plane images preloaded, so
// that the stock kind CLI drives it unchanged and nothing is pulled.
package kindimage

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/build/debian"
	"k1m.dev/k1m/pkg/fsutil"
)

// BasePackages are kindest/base's packages, with Debian's containerd, runc
// and CNI plugins in place of the ones kind compiles, and busybox-static
// for the kube-proxy image's iptables wrapper: KIND_BASE_PACKAGES of
// build/debian/packages.env.
var BasePackages = debian.Packages("KIND_BASE_PACKAGES")

// recipe changes whenever what prepareBase does to the tree changes, so a
// cached base is rebuilt.
const recipe = "k1m-kind-base-1"

// Inputs are what the images are made from.
type Inputs struct {
	KindDir string // the sigs.k8s.io/kind module (images/base/files)
	Work    string // the node image's trees, layers and archives
	// Base holds the base tree and its layer, named by BaseKey, so that
	// builds in fresh clones share them (K1M_CACHE_DIR/kind-base); empty
	// means Work.
	Base   string
	Mirror string // the Debian mirror debootstrap uses
	Log    io.Writer
}

// baseDir holds the base tree and its layer.
func (in Inputs) baseDir() string {
	if in.Base != "" {
		return in.Base
	}
	return in.Work
}

// BaseKey names the base image after its packages, kind's version and the
// recipe.
func (in Inputs) BaseKey() string {
	return debian.Key(append([]string{recipe, filepath.Base(in.KindDir)}, BasePackages...))
}

// BaseRoot makes (once) the base image's root file system and returns it.
func (in Inputs) BaseRoot() (string, error) {
	root := filepath.Join(in.baseDir(), "kind-base-"+in.BaseKey())
	if _, err := os.Stat(root + ".prepared"); err == nil {
		return root, nil
	}
	if err := debian.Bootstrap(root, BasePackages, in.Mirror, "kind base", in.Log); err != nil {
		return "", err
	}
	fmt.Fprintf(in.Log, "kind base: laying out kind's files, containerd and systemd units\n")
	if err := in.prepareBase(root); err != nil {
		return "", fmt.Errorf("preparing the kind base tree %s: %w", root, err)
	}
	return root, os.WriteFile(root+".prepared", nil, 0o644)
}

// prepareBase does what kind's base Dockerfile does after installing its
// packages: kind's files, systemd trimmed to what a node needs, containerd
// and the kubelet enabled, containerd's config and base OCI spec.
func (in Inputs) prepareBase(root string) error {
	files := filepath.Join(in.KindDir, "images", "base", "files")
	if err := fsutil.CopyTree(files, root, kindFileMode); err != nil {
		return err
	}
	steps := []func(string) error{trimSystemd, placeBinaries, writeContainerdConfig, writeBaseSpec, enableUnits}
	for _, step := range steps {
		if err := step(root); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(root, "etc/kubernetes/manifests"), 0o755)
}

// kindFileMode is the mode kind's Dockerfile gives its base files:
// scripts in bin directories are executable, everything else is 0644.
func kindFileMode(rel string) os.FileMode {
	if filepath.Base(filepath.Dir(rel)) == "bin" {
		return 0o755
	}
	return 0o644
}

// trimSystemd keeps systemd from starting what a container has no use for
// (kind's Dockerfile does the same) and points /sbin/init at it.
func trimSystemd(root string) error {
	for _, glob := range []string{
		"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
		"lib/systemd/system/multi-user.target.wants/*",
		"etc/systemd/system/*.wants/*",
		"lib/systemd/system/local-fs.target.wants/*",
		"lib/systemd/system/sockets.target.wants/*udev*",
		"lib/systemd/system/sockets.target.wants/*initctl*",
		"lib/systemd/system/basic.target.wants/*",
	} {
		matches, _ := filepath.Glob(filepath.Join(root, glob))
		for _, m := range matches {
			if err := os.Remove(m); err != nil {
				return err
			}
		}
	}
	if err := appendFile(filepath.Join(root, "etc/systemd/journald.conf"), "ReadKMsg=no\n"); err != nil {
		return err
	}
	init := filepath.Join(root, "sbin/init")
	os.Remove(init)
	return os.Symlink("/lib/systemd/systemd", init)
}

// placeBinaries puts Debian's containerd and CNI plugins where kind's units
// and config expect them (/usr/local/bin, /opt/cni/bin).
func placeBinaries(root string) error {
	for _, b := range []string{"containerd", "ctr", "containerd-shim-runc-v2"} {
		link := filepath.Join(root, "usr/local/bin", b)
		os.Remove(link)
		if err := os.Symlink("/usr/bin/"+b, link); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "opt/cni"), 0o755); err != nil {
		return err
	}
	os.Remove(filepath.Join(root, "opt/cni/bin"))
	return os.Symlink("/usr/lib/cni", filepath.Join(root, "opt/cni/bin"))
}

func writeContainerdConfig(root string) error {
	return writeFile(filepath.Join(root, "etc/containerd/config.toml"), ContainerdConfig, 0o644)
}

// writeBaseSpec writes containerd's base OCI spec as kind's Dockerfile
// does: `ctr oci spec`, with kind's product-files hook and no rlimits.
func writeBaseSpec(root string) error {
	out, err := exec.Command("chroot", root, "ctr", "oci", "spec").Output()
	if err != nil {
		return fmt.Errorf("chroot %s ctr oci spec: %w", root, err)
	}
	spec, err := kindBaseSpec(out)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(root, "etc/containerd/cri-base.json"), string(spec), 0o644)
}

// kindBaseSpec adds the createContainer hook and drops process.rlimits.
func kindBaseSpec(raw []byte) ([]byte, error) {
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("reading ctr's OCI spec: %w", err)
	}
	hooks, _ := spec["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	create, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(create, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	spec["hooks"] = hooks
	if process, ok := spec["process"].(map[string]any); ok {
		delete(process, "rlimits")
	}
	return json.MarshalIndent(spec, "", "    ")
}

// enableUnits enables what kind's Dockerfile enables, offline (systemctl
// in a chroot only writes the links).
func enableUnits(root string) error {
	for _, args := range [][]string{
		{"enable", "kubelet.service", "containerd.service", "undo-mount-hacks.service"},
		{"mask", "systemd-binfmt.service"},
	} {
		cmd := exec.Command("chroot", append([]string{root, "systemctl"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("chroot systemctl %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func writeFile(path, data string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}

func appendFile(path, data string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
