// Package cleanup stops everything k1m started on this machine and undoes
// its changes, as k3s-killall.sh does: pod processes (by their cgroup under
// /k1m), containerd shims and daemons k1m configured, mounts under k1m's
// directories, pod network namespaces, the CNI bridge, and kube-proxy's
// packet-filter rules. Data directories are kept.
package cleanup

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"k1m.dev/k1m/pkg/cgroups"
)

// CgroupRoot is the parent of every k1m node's cgroup root (/k1m/<node>).
const CgroupRoot = "/k1m"

// Run cleans up; dirs are the directories whose mounts are released
// (data and run directories). It reports what it did to out.
func Run(dirs []string, out io.Writer) error {
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	killed := killMatching(func(pid int) bool { return inCgroup(pid, CgroupRoot) || isK1mRuntime(pid) })
	fmt.Fprintf(out, "k1m cleanup: stopped %d processes (pods, containerd shims, containerd)\n", killed)
	n, err := unmountUnder(append(dirs, "/run/k1m"), []string{"/run/netns/cni-"})
	note(err)
	fmt.Fprintf(out, "k1m cleanup: released %d mounts\n", n)
	note(removeNetns())
	if link, err := netlink.LinkByName("k1m0"); err == nil {
		note(netlink.LinkDel(link))
	}
	note(removeCgroups())
	note(removeKubeChains())
	note(removeNetpolTable())
	if len(errs) > 0 {
		return fmt.Errorf("k1m cleanup: %s", strings.Join(errs, "; "))
	}
	return nil
}

// killMatching SIGKILLs matching processes until none is left.
func killMatching(match func(pid int) bool) int {
	total := 0
	for round := 0; round < 20; round++ {
		var pids []int
		for _, pid := range allPIDs() {
			if pid != os.Getpid() && match(pid) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				total++
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return total
}

func allPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// inCgroup tells whether pid is in a cgroup under root in any hierarchy.
func inCgroup(pid int, root string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[2] == root || strings.HasPrefix(parts[2], root+"/")) {
			return true
		}
	}
	return false
}

// isK1mRuntime tells a containerd or shim k1m started: its socket or
// config lives under /run/k1m or a k1m-written config.toml.
func isK1mRuntime(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
	base := filepath.Base(args[0])
	if base != "containerd" && !strings.HasPrefix(base, "containerd-shim") {
		return false
	}
	for i, a := range args {
		if strings.HasPrefix(a, "/run/k1m/") {
			return true
		}
		if a == "--config" && i+1 < len(args) {
			head, _ := os.ReadFile(args[i+1])
			if bytes.HasPrefix(head, []byte("# Written by k1m agent")) {
				return true
			}
		}
	}
	return false
}

// unmountUnder lazily unmounts every mount point cleanup releases
// (released), deepest first.
func unmountUnder(dirs, namePrefixes []string) (int, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if mp := unescape(fields[4]); released(mp, dirs, namePrefixes) {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	n := 0
	var errs []string
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			errs = append(errs, fmt.Sprintf("unmount %s: %v", mp, err))
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return n, nil
}

// released tells whether mount point mp is one cleanup releases: a
// directory of dirs or anything inside it (a path boundary: /run/k1m does
// not take /run/k1m-nofsync, an operator's tmpfs), or a path starting
// with one of namePrefixes (the CNI plugins' /run/netns/cni-<id>).
func released(mp string, dirs, namePrefixes []string) bool {
	for _, d := range dirs {
		d = filepath.Clean(d)
		if d != "." && d != "/" && (mp == d || strings.HasPrefix(mp, d+"/")) {
			return true
		}
	}
	for _, p := range namePrefixes {
		if p != "" && strings.HasPrefix(mp, p) {
			return true
		}
	}
	return false
}

func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// removeNetns deletes the pod network namespaces containerd created.
func removeNetns() error {
	paths, _ := filepath.Glob("/run/netns/cni-*")
	for _, p := range paths {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// removeCgroups removes the /k1m cgroup trees (pods) and the servers'
// control-plane cgroups, deepest first.
func removeCgroups() error {
	var dirs []string
	entries, _ := os.ReadDir(cgroups.Mount)
	for _, e := range entries {
		for _, top := range []string{CgroupRoot, cgroups.ControlPlaneRoot} {
			root := filepath.Join(cgroups.Mount, e.Name(), top)
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("removing cgroup %s: %w", d, err)
		}
	}
	return nil
}
