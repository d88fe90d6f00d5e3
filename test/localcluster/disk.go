package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"k1m.dev/k1m/pkg/constants"
)

// diskHeadroomPercent is the room a cluster needs above the kubelets'
// eviction threshold on the file system of its data: the images, pods and
// etcds of a test run take a few GiB, and the build that runs beside it more.
const diskHeadroomPercent = 2

// checkDiskRoom refuses to start on a file system so full that the
// kubelets would report DiskPressure: each refuses every pod below
// constants.EvictionDiskFree available (counted as the kubelet does, the
// space available to unprivileged users), and a test then sees only pods
// that never run.
func (c *Cluster) checkDiskRoom(context.Context) error {
	dir := existingAncestor(c.opts.DataRoot)
	available, total, err := diskSpace(dir)
	if err != nil {
		return err
	}
	return diskRoom(dir, available, total)
}

// diskSpace is the space of dir's file system available to unprivileged
// users (as the kubelet counts it), and its size, in bytes.
func diskSpace(dir string) (available, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("checking the free space under %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// diskRoom is checkDiskRoom's decision for a file system of total bytes
// with available bytes available.
func diskRoom(dir string, available, total uint64) error {
	threshold, err := strconv.ParseFloat(strings.TrimSuffix(constants.EvictionDiskFree, "%"), 64)
	if err != nil || total == 0 {
		return fmt.Errorf("cannot check the free space under %s (threshold %q, %d bytes in all)", dir, constants.EvictionDiskFree, total)
	}
	percent := float64(available) * 100 / float64(total)
	if percent >= threshold+diskHeadroomPercent {
		return nil
	}
	need := uint64((threshold+diskHeadroomPercent)/100*float64(total)) - available
	return fmt.Errorf("the file system holding %s has %.1f%% available (%s of %s): kubelets refuse pods below %s available (DiskPressure); free at least %s first (old cluster data, go clean -cache)",
		dir, percent, gib(available), gib(total), constants.EvictionDiskFree, gib(need))
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// existingAncestor is dir, or its closest parent that exists (DATA_ROOT is
// made later).
func existingAncestor(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}
