package cgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFiles(t *testing.T, root string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(data)
	}
	return out
}

const hybridProcCgroup = "12:pids:/system.slice/k1m-server.service\n4:memory:/system.slice/k1m-server.service\n1:name=systemd:/system.slice/k1m-server.service\n0::/system.slice/k1m-server.service\n"

func TestMemoryLimitV1(t *testing.T) {
	mount := t.TempDir()
	writeFiles(t, mount, map[string]string{
		"memory/memory.limit_in_bytes":                                 "9223372036854771712\n",
		"memory/system.slice/memory.limit_in_bytes":                    "9223372036854771712\n",
		"memory/system.slice/k1m-server.service/memory.limit_in_bytes": "6442450944\n",
	})
	if got, err := MemoryLimit(mount, hybridProcCgroup); err != nil || got != 6<<30 {
		t.Errorf("MemoryLimit = %d, %v; want the unit's 6 GiB", got, err)
	}
	writeFiles(t, mount, map[string]string{"memory/system.slice/k1m-server.service/memory.limit_in_bytes": "9223372036854771712\n"})
	if got, err := MemoryLimit(mount, hybridProcCgroup); err != nil || got != 0 {
		t.Errorf("MemoryLimit with none set = %d, %v; want 0", got, err)
	}
}

func TestMemoryLimitV2TakesTheLowestParent(t *testing.T) {
	mount := t.TempDir()
	writeFiles(t, mount, map[string]string{
		"cgroup.controllers":                         "cpu memory pids\n",
		"system.slice/memory.max":                    "4294967296\n",
		"system.slice/k1m-server.service/memory.max": "max\n",
	})
	if got, err := MemoryLimit(mount, "0::/system.slice/k1m-server.service\n"); err != nil || got != 4<<30 {
		t.Errorf("MemoryLimit = %d, %v; want the slice's 4 GiB", got, err)
	}
}

func TestConfineV1(t *testing.T) {
	mount := t.TempDir()
	writeFiles(t, mount, map[string]string{"memory/cgroup.procs": ""})
	if err := Confine(mount, "/k1m-control-plane/n1", 2<<30, 4242); err != nil {
		t.Fatal(err)
	}
	dir := "memory/k1m-control-plane/n1/"
	want := map[string]string{dir + "memory.limit_in_bytes": "2147483648", dir + "cgroup.procs": "4242"}
	if got := readFiles(t, mount, dir+"memory.limit_in_bytes", dir+"cgroup.procs"); !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}
}

func TestConfineV2EnablesMemoryInParents(t *testing.T) {
	mount := t.TempDir()
	writeFiles(t, mount, map[string]string{"cgroup.controllers": "cpu memory pids\n"})
	if err := Confine(mount, "/k1m-control-plane/n1", 2<<30, 4242); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cgroup.subtree_control":                   "+memory",
		"k1m-control-plane/cgroup.subtree_control": "+memory",
		"k1m-control-plane/n1/memory.max":          "2147483648",
		"k1m-control-plane/n1/cgroup.procs":        "4242",
	}
	names := []string{"cgroup.subtree_control", "k1m-control-plane/cgroup.subtree_control", "k1m-control-plane/n1/memory.max", "k1m-control-plane/n1/cgroup.procs"}
	if got := readFiles(t, mount, names...); !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}
}

func TestConfinePath(t *testing.T) {
	v1, v2 := t.TempDir(), t.TempDir()
	writeFiles(t, v2, map[string]string{"cgroup.controllers": "cpu memory pids\n"})
	for _, tc := range []struct{ mount, procCgroup, want string }{
		{v1, hybridProcCgroup, "/k1m-control-plane/n1"},                                                     // v1: only memory moves; systemd keeps its own hierarchy
		{v2, "0::/\n", "/k1m-control-plane/n1"},                                                             // v2, not in a unit
		{v2, "0::/system.slice/k1m-server.service\n", "/system.slice/k1m-server.service/k1m-control-plane"}, // v2 unit: a leaf under it
	} {
		if got := ConfinePath(tc.mount, tc.procCgroup, "n1"); got != tc.want {
			t.Errorf("ConfinePath(%q) = %s, want %s", tc.procCgroup, got, tc.want)
		}
	}
}
