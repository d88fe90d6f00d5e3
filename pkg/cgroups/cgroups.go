// Package cgroups prepares the cgroup a node's kubelet puts its pods
// under. Each k1m node gets its own cgroup root (/k1m/<node>) so that
// several nodes can share one machine without their kubepods trees
// colliding; the kubelet refuses a cgroup root that does not exist.
package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Mount is where cgroup file systems are mounted.
const Mount = "/sys/fs/cgroup"

// Ensure creates root (e.g. /k1m/node-1) in every cgroup hierarchy: the
// unified one on cgroup v2, each v1 controller otherwise. On v1 cpuset,
// a new cgroup needs cpus and mems before it can hold tasks.
func Ensure(root string) error {
	if _, err := os.Stat(filepath.Join(Mount, "cgroup.controllers")); err == nil {
		return os.MkdirAll(filepath.Join(Mount, root), 0o755)
	}
	entries, err := os.ReadDir(Mount)
	if err != nil {
		return fmt.Errorf("reading %s: %w", Mount, err)
	}
	for _, e := range entries {
		hierarchy := filepath.Join(Mount, e.Name())
		if !e.IsDir() || e.Name() == "unified" {
			continue
		}
		if _, err := os.Stat(filepath.Join(hierarchy, "cgroup.procs")); err != nil {
			continue // a symlink like cpu,cpuacct or not a hierarchy
		}
		if err := ensureV1(hierarchy, root); err != nil {
			return err
		}
	}
	return nil
}

func ensureV1(hierarchy, root string) error {
	path := hierarchy
	for _, part := range strings.Split(strings.Trim(root, "/"), "/") {
		parent := path
		path = filepath.Join(path, part)
		if err := os.Mkdir(path, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating cgroup %s: %w", path, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if err := inherit(parent, path, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// inherit copies a cpuset file from parent when the child's is empty.
func inherit(parent, child, name string) error {
	cur, err := os.ReadFile(filepath.Join(child, name))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil || strings.TrimSpace(string(cur)) != "" {
		return err
	}
	val, err := os.ReadFile(filepath.Join(parent, name))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(child, name), val, 0o644)
}
