package cgroups

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// ControlPlaneRoot is the parent of the cgroups k1m servers confine
// themselves to (one per server: ControlPlaneRoot/<node name>), beside
// the nodes' pod cgroups under /k1m.
const ControlPlaneRoot = "/k1m-control-plane"

// noLimitV1 is where cgroup v1 reports "no limit" (the page-rounded
// maximum): anything this large is none.
const noLimitV1 = 1 << 62

// unified tells whether mount holds the cgroup v2 hierarchy.
func unified(mount string) bool {
	_, err := os.Stat(filepath.Join(mount, "cgroup.controllers"))
	return err == nil
}

// memoryPath is the process's cgroup in the hierarchy that limits memory,
// read from its /proc/PID/cgroup text: the memory controller's line on
// v1 (hybrid machines have both), the "0::" line on v2.
func memoryPath(mount, procCgroup string) (string, error) {
	v2 := unified(mount)
	for _, line := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v2 && parts[0] == "0" && parts[1] == "" {
			return parts[2], nil
		}
		for _, c := range strings.Split(parts[1], ",") {
			if !v2 && c == "memory" {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("no memory cgroup in /proc/self/cgroup")
}

// memoryDir is the directory of cgroup path p in the memory hierarchy.
func memoryDir(mount, p string) string {
	if unified(mount) {
		return filepath.Join(mount, p)
	}
	return filepath.Join(mount, "memory", p)
}

// limitFile is the file holding a cgroup's memory limit.
func limitFile(mount string) string {
	if unified(mount) {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

// MemoryLimit is the smallest memory limit on the cgroup of the process
// whose /proc/PID/cgroup is procCgroup, or on any of its parents (a
// systemd MemoryMax, a container's limit); 0 when there is none.
func MemoryLimit(mount, procCgroup string) (int64, error) {
	p, err := memoryPath(mount, procCgroup)
	if err != nil {
		return 0, err
	}
	var lowest int64
	for dir := path.Clean(p); ; dir = path.Dir(dir) {
		data, err := os.ReadFile(filepath.Join(memoryDir(mount, dir), limitFile(mount)))
		if err == nil {
			v := strings.TrimSpace(string(data))
			if n, perr := strconv.ParseInt(v, 10, 64); perr == nil && n < noLimitV1 && (lowest == 0 || n < lowest) {
				lowest = n
			}
		}
		if dir == "/" || dir == "." {
			return lowest, nil
		}
	}
}

// ConfinePath is the cgroup a server named name confines itself to. On
// v2, a process that already sits in a cgroup other than the root (a
// systemd unit, which must have Delegate=yes) nests a leaf under it,
// since leaving it would take the process away from its service manager;
// otherwise it is ControlPlaneRoot/name.
func ConfinePath(mount, procCgroup, name string) string {
	if unified(mount) {
		if p, err := memoryPath(mount, procCgroup); err == nil && path.Clean(p) != "/" {
			return path.Join(p, "k1m-control-plane")
		}
	}
	return ControlPlaneRoot + "/" + name
}

// Confine creates cgroup p (e.g. /k1m-control-plane/node-1) with a memory
// limit of limit bytes and moves process pid, with all its threads, into
// it; processes it starts later are born there. On v2 the process moves
// first and the memory controller is enabled in every parent after: a
// cgroup that still holds a process cannot hand controllers to its
// children (a systemd unit's own cgroup, left for the leaf), and the
// leaf's memory.max exists only once its parent enabled the controller.
func Confine(mount, p string, limit int64, pid int) error {
	dir := memoryDir(mount, p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	if unified(mount) {
		if err := moveInto(dir, pid); err != nil {
			return err
		}
		if err := enableInParents(mount, dir, "+memory"); err != nil {
			return err
		}
		return setLimit(dir, limitFile(mount), limit)
	}
	if err := setLimit(dir, limitFile(mount), limit); err != nil {
		return err
	}
	return moveInto(dir, pid)
}

func moveInto(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("moving process %d into %s: %w", pid, dir, err)
	}
	return nil
}

func setLimit(dir, file string, limit int64) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		return fmt.Errorf("setting the memory limit of %s to %d bytes: %w", dir, limit, err)
	}
	return nil
}
