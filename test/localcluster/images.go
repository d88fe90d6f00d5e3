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
	archives, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil || len(archives) == 0 {
		return fmt.Errorf("no image archives (*.tar) in %s", dir)
	}
	return c.importArchives(ctx, dir, archives)
}

// ImportArchive loads one image archive into every running node's
// containerd, as Import does.
func (c *Cluster) ImportArchive(ctx context.Context, archive string) error {
	return c.importArchives(ctx, archive, []string{archive})
}

// importArchives loads archives (from where, for messages) into every
// running node's containerd.
func (c *Cluster) importArchives(ctx context.Context, where string, archives []string) error {
	socks := runningSockets()
	if len(socks) == 0 {
		return fmt.Errorf("no node's containerd is running (make cluster first)")
	}
	if err := c.checkImportRoom(where, archives, len(socks)); err != nil {
		return err
	}
	var imports []imageImport
	for _, archive := range archives {
		info, err := os.Stat(archive)
		if err != nil {
			return err
		}
		for _, sock := range socks {
			imports = append(imports, imageImport{archive: archive, size: info.Size(), sock: sock})
		}
	}
	return runImports(ctx, imports, importWorkers, func(ctx context.Context, im imageImport) error {
		node := filepath.Base(filepath.Dir(filepath.Dir(im.sock)))
		c.logf("importing %s (%s) into %s", filepath.Base(im.archive), humanSize(im.size), node)
		out, err := exec.CommandContext(ctx, "ctr", "--address", im.sock, "--namespace", "k8s.io",
			"images", "import", "--no-unpack=false", im.archive).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr images import %s into %s: %w\n%s", im.archive, node, err, out)
		}
		return nil
	})
}

// imageImport is one archive into one node's containerd.
type imageImport struct {
	archive string
	size    int64
	sock    string
}

// importWorkers is how many imports run at once: an import is mostly one
// core's work (digests, unpacking), so two keep a 2-core machine busy
// without the nodes' own work starving.
const importWorkers = 2

// runImports runs do for each import, workers at a time, and returns the
// first error; the imports not started by then are not started.
func runImports(ctx context.Context, imports []imageImport, workers int, do func(context.Context, imageImport) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan imageImport)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for im := range next {
				if err := do(ctx, im); err != nil {
					errs <- err
					cancel()
					for range next { // drain: the sender stops at ctx
					}
					return
				}
			}
			errs <- nil
		}()
	}
feed:
	for _, im := range imports {
		select {
		case next <- im:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
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
