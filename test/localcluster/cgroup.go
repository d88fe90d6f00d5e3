package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k1m.dev/k1m/pkg/cgroups"
	"k1m.dev/k1m/pkg/constants"
)

// serverCgroup is the memory cgroup server n confines itself to when
// given --memory-limit: the server computes it from the cgroup it starts
// in, which is this process's.
func serverCgroup(n Node) (string, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	return cgroups.ConfinePath(cgroups.Mount, string(self), n.Name), nil
}

// memoryLimitFile is cgroup p's memory limit file.
func memoryLimitFile(p string) string {
	if _, err := os.Stat(filepath.Join(cgroups.Mount, "cgroup.controllers")); err == nil {
		return filepath.Join(cgroups.Mount, p, "memory.max")
	}
	return filepath.Join(cgroups.Mount, "memory", p, "memory.limit_in_bytes")
}

// inMemoryCgroup tells whether a /proc/PID/cgroup text puts the process
// in cgroup p of the memory controller (v1) or of the unified hierarchy
// (v2).
func inMemoryCgroup(procCgroup, p string) bool {
	for _, line := range strings.Split(procCgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[2] != p {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			return true
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				return true
			}
		}
	}
	return false
}

// checkServerMemory wants server n in its own memory cgroup with
// ServerMemory as the limit: the server confines itself, given
// --memory-limit, and the harness checks it did.
func (c *Cluster) checkServerMemory(n Node) error {
	pid, err := ReadPid(n.PidFile)
	if err != nil {
		return err
	}
	want, err := serverCgroup(n)
	if err != nil {
		return err
	}
	proc, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err
	}
	if !inMemoryCgroup(string(proc), want) {
		return fmt.Errorf("%s (pid %d) is not in memory cgroup %s (--memory-limit %s):\n%s", n.Label(), pid, want, c.opts.ServerMemory, proc)
	}
	file := memoryLimitFile(want)
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	// The kernel keeps whole pages.
	page := int64(os.Getpagesize())
	limit := c.opts.memoryBytes() / page * page
	if got, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err != nil || got != limit {
		return fmt.Errorf("%s: %s, want %d (--memory-limit %s)", file, strings.TrimSpace(string(raw)), limit, c.opts.ServerMemory)
	}
	c.logf("%s runs in memory cgroup %s, limit %s", n.Label(), want, c.opts.ServerMemory)
	return nil
}

// serverCgroupsLeft lists the memory cgroups servers of a several-server
// cluster confined themselves to that are still there, whatever the
// cluster's layout.
func serverCgroupsLeft() []string {
	left, _ := filepath.Glob(filepath.Dir(memoryLimitFile(cgroups.ControlPlaneRoot + "/" + constants.LocalServerPrefix + "*")))
	return left
}
