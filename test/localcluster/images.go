package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// containerdSockets are the sockets of the nodes' containerds: each node
// runs its own under its run directory, /run/k1m/NODE.
const containerdSockets = "/run/k1m/*/containerd/containerd.sock"

// Import loads every image archive (*.tar) of dir into every running
// node's containerd, as the kubelet's image store (namespace k8s.io).
func (c *Cluster) Import(ctx context.Context, dir string) error {
	socks := runningSockets()
	if len(socks) == 0 {
		return fmt.Errorf("no node's containerd is running (make cluster first)")
	}
	archives, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil || len(archives) == 0 {
		return fmt.Errorf("no image archives (*.tar) in %s", dir)
	}
	if err := c.checkImportRoom(dir, archives, len(socks)); err != nil {
		return err
	}
	for _, archive := range archives {
		info, err := os.Stat(archive)
		if err != nil {
			return err
		}
		for _, sock := range socks {
			node := filepath.Base(filepath.Dir(filepath.Dir(sock)))
			c.logf("importing %s (%s) into %s", filepath.Base(archive), humanSize(info.Size()), node)
			out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", "k8s.io",
				"images", "import", "--no-unpack=false", archive).CombinedOutput()
			if err != nil {
				return fmt.Errorf("ctr images import %s into %s: %w\n%s", archive, node, err, out)
			}
		}
	}
	return nil
}

// checkImportRoom refuses an import that would leave the kubelets under
// their eviction threshold (checkDiskRoom): each node's containerd keeps
// an archive's layers twice, as blobs and unpacked.
func (c *Cluster) checkImportRoom(dir string, archives []string, nodes int) error {
	var size uint64
	for _, a := range archives {
		info, err := os.Stat(a)
		if err != nil {
			return err
		}
		size += uint64(info.Size())
	}
	root := existingAncestor(c.opts.DataRoot)
	available, total, err := diskSpace(root)
	if err != nil {
		return err
	}
	return importRoom(dir, size, nodes, root, available, total)
}

// importRoom is checkImportRoom's decision: archives of size bytes in dir
// into nodes nodes, on root's file system of total bytes, available free.
func importRoom(dir string, size uint64, nodes int, root string, available, total uint64) error {
	need := min(2*size*uint64(nodes), available)
	if err := diskRoom(root, available-need, total); err != nil {
		return fmt.Errorf("importing %s (%s) into %d nodes takes about %s, after which %w", dir, gib(size), nodes, gib(need), err)
	}
	return nil
}

// runningSockets lists the containerd sockets that exist.
func runningSockets() []string {
	paths, _ := filepath.Glob(containerdSockets)
	var socks []string
	for _, p := range paths {
		if info, err := os.Stat(p); err == nil && info.Mode()&os.ModeSocket != 0 {
			socks = append(socks, p)
		}
	}
	return socks
}

// humanSize is n bytes in du -h's style: 512, 4.0K, 37M, 1.2G.
func humanSize(n int64) string {
	const units = "KMGT"
	if n < 1024 {
		return fmt.Sprint(n)
	}
	v, unit := float64(n), -1
	for v >= 1024 && unit < len(units)-1 {
		v /= 1024
		unit++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f%c", v, units[unit])
	}
	return fmt.Sprintf("%.0f%c", v, units[unit])
}
