package cgroups

import (
	"reflect"
	"testing"
	"time"
)

func TestCapCPUV1(t *testing.T) {
	mount := t.TempDir()
	writeFiles(t, mount, map[string]string{"cpu/cgroup.procs": ""})
	if err := CapCPU(mount, "/k1m-bench/sim", 0.5, 4242); err != nil {
		t.Fatal(err)
	}
	dir := "cpu/k1m-bench/sim/"
	want := map[string]string{dir + "cpu.cfs_period_us": "100000", dir + "cpu.cfs_quota_us": "50000", dir + "cgroup.procs": "4242"}
	if got := readFiles(t, mount, dir+"cpu.cfs_period_us", dir+"cpu.cfs_quota_us", dir+"cgroup.procs"); !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}
}

func TestCapCPUV2EnablesCPUInParents(t *testing.T) {
	mount := t.TempDir()
	writeFiles(t, mount, map[string]string{"cgroup.controllers": "cpu memory pids\n"})
	if err := CapCPU(mount, "/k1m-bench/sim", 1.25, 4242); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cgroup.subtree_control":           "+cpu",
		"k1m-bench/cgroup.subtree_control": "+cpu",
		"k1m-bench/sim/cpu.max":            "125000 100000",
		"k1m-bench/sim/cgroup.procs":       "4242",
	}
	names := []string{"cgroup.subtree_control", "k1m-bench/cgroup.subtree_control", "k1m-bench/sim/cpu.max", "k1m-bench/sim/cgroup.procs"}
	if got := readFiles(t, mount, names...); !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}
}

func TestCapCPURefusesNoCores(t *testing.T) {
	if err := CapCPU(t.TempDir(), "/k1m-bench/sim", 0, 1); err == nil {
		t.Error("a cap of 0 cores was accepted")
	}
}

func TestParseCPUStat(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Throttling
	}{
		{"v1", "nr_periods 120\nnr_throttled 7\nthrottled_time 350000000\nnr_bursts 0\nburst_time 0\n",
			Throttling{Periods: 120, ThrottledPeriods: 7, Throttled: 350 * time.Millisecond}},
		{"v2", "usage_usec 9000\nuser_usec 6000\nsystem_usec 3000\nnr_periods 40\nnr_throttled 2\nthrottled_usec 1500\n",
			Throttling{Periods: 40, ThrottledPeriods: 2, Throttled: 1500 * time.Microsecond}},
	} {
		got, err := ParseCPUStat(tc.text)
		if err != nil || got != tc.want {
			t.Errorf("%s: ParseCPUStat = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "nr_periods 1\nnr_throttled 0\n", "nr_periods x\nnr_throttled 0\nthrottled_time 0\n"} {
		if got, err := ParseCPUStat(bad); err == nil {
			t.Errorf("ParseCPUStat(%q) = %+v, want an error", bad, got)
		}
	}
}
