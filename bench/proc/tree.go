package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Member is a process of a tree: its pid and the name it is accounted
// under.
type Member struct {
	PID  int
	Name string
	// Own tells a process of the root's own binary (`k1m server` and
	// the components the stock build runs as its children) from the
	// others (containerd, its shims, the pods).
	Own bool
}

// Tree lists root and every process descended from it, named by Name.
func Tree(root int) ([]Member, error) {
	parents, err := readParents()
	if err != nil {
		return nil, err
	}
	rootExe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", root))
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", root, err)
	}
	var out []Member
	for _, pid := range Descendants(root, parents) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // it ended since
		}
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		own := exe == rootExe
		out = append(out, Member{PID: pid, Name: Name(argv, own), Own: own})
	}
	return out, nil
}

// Descendants are root and the processes below it, in pid order, given
// each process's parent.
func Descendants(root int, parents map[int]int) []int {
	children := map[int][]int{}
	for pid, ppid := range parents {
		children[ppid] = append(children[ppid], pid)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	slices.Sort(out)
	return out
}

// Name is what a process is accounted under: for the root's own binary,
// its subcommand ("k1m server", "k1m kube-apiserver": the stock build runs
// each component as `k1m <component>`), else the program's base name.
func Name(argv []string, own bool) string {
	if len(argv) == 0 || argv[0] == "" {
		return "?"
	}
	base := filepath.Base(argv[0])
	if own && len(argv) > 1 && !strings.HasPrefix(argv[1], "-") {
		return base + " " + argv[1]
	}
	return base
}

// readParents maps every process to its parent (/proc/PID/stat field 4).
func readParents() (map[int]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	parents := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended since
		}
		if ppid, err := ParseStatParent(string(stat)); err == nil {
			parents[pid] = ppid
		}
	}
	return parents, nil
}

// ParseStatParent returns the parent pid (field 4) from /proc/PID/stat.
func ParseStatParent(stat string) (int, error) {
	end := strings.LastIndexByte(stat, ')')
	fields := strings.Fields(stat[end+1:])
	if end < 0 || len(fields) < 2 {
		return 0, fmt.Errorf("unexpected /proc stat format: %q", stat)
	}
	return strconv.Atoi(fields[1])
}

// ControlPlaneUsage is the usage of root and every process of its own
// binary below it, summed: a `k1m server` and its component children
// (the controller-manager and scheduler in both builds; kube-apiserver,
// the kubelet and kube-proxy too in the stock build). containerd, its
// shims and the pods are left out. The one way every benchmark counts a
// server's control plane. A child that ended since an earlier reading
// takes its CPU with it (a restarted controller-manager, say), which makes
// a window's figure low, never high.
func ControlPlaneUsage(root int) (Usage, error) {
	members, err := Tree(root)
	if err != nil {
		return Usage{}, err
	}
	return sumOwn(root, members, ReadUsage)
}

// sumOwn sums read over the members of root's own binary; root's must
// be read, the others' may have ended.
func sumOwn(root int, members []Member, read func(int) (Usage, error)) (Usage, error) {
	var sum Usage
	for _, m := range members {
		if !m.Own {
			continue
		}
		u, err := read(m.PID)
		if err != nil {
			if m.PID == root {
				return Usage{}, err
			}
			continue // it ended since
		}
		sum = sum.Add(u)
	}
	return sum, nil
}

// Named are the PIDs whose command name (/proc/PID/comm) is name. A
// pod's process is not under the server's own process tree (containerd's
// shim leaves it), so the bench finds it by name: it runs one cluster at
// a time.
func Named(name string) ([]int, error) {
	comms, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, path := range comms {
		comm, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue // gone, or another
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
