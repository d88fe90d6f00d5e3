package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEnsureCreatesTheRootEverywhere(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	root := "/k1m-test/" + filepath.Base(t.TempDir())
	if err := Ensure(root); err != nil {
		t.Fatal(err)
	}
	defer removeAll(root)
	if err := Ensure(root); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	for _, probe := range []string{"memory", "cpuset", "pids", ""} {
		dir := filepath.Join(Mount, probe, root)
		if probe == "" {
			if _, err := os.Stat(filepath.Join(Mount, "cgroup.controllers")); err != nil {
				continue
			}
		} else if _, err := os.Stat(filepath.Join(Mount, probe, "cgroup.procs")); err != nil {
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s missing: %v", dir, err)
		}
		if probe == "cpuset" {
			if b, _ := os.ReadFile(filepath.Join(dir, "cpuset.cpus")); len(b) < 2 {
				t.Errorf("%s has no cpus: a pod could not run there", dir)
			}
		}
	}
}

func removeAll(root string) {
	entries, _ := os.ReadDir(Mount)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(Mount, e.Name(), root))
		_ = os.Remove(filepath.Join(Mount, e.Name(), filepath.Dir(root)))
	}
	_ = os.Remove(filepath.Join(Mount, root))
}
