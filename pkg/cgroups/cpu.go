package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuPeriod is the CFS period a CPU cap is expressed over (the kernel's
// default, 100 ms).
const cpuPeriod = 100 * time.Millisecond

// cpuDir is the directory of cgroup path p in the hierarchy of the cpu
// controller.
func cpuDir(mount, p string) string {
	if unified(mount) {
		return filepath.Join(mount, p)
	}
	return filepath.Join(mount, "cpu", p)
}

// CapCPU creates cgroup p (e.g. /k1m-bench/node-simulator) with its CPU
// capped at cores (1.5 = one and a half cores' time per period) and moves
// process pid, with its threads, into it. As Confine does for memory, on
// v2 the process moves first and the cpu controller is enabled in every
// parent after.
func CapCPU(mount, p string, cores float64, pid int) error {
	if cores <= 0 {
		return fmt.Errorf("CPU cap %g cores: want more than 0", cores)
	}
	dir := cpuDir(mount, p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	quota := int64(cores * float64(cpuPeriod/time.Microsecond))
	period := int64(cpuPeriod / time.Microsecond)
	if unified(mount) {
		if err := moveInto(dir, pid); err != nil {
			return err
		}
		if err := enableInParents(mount, dir, "+cpu"); err != nil {
			return err
		}
		return writeCgroupFile(dir, "cpu.max", fmt.Sprintf("%d %d", quota, period))
	}
	if err := writeCgroupFile(dir, "cpu.cfs_period_us", strconv.FormatInt(period, 10)); err != nil {
		return err
	}
	if err := writeCgroupFile(dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
		return err
	}
	return moveInto(dir, pid)
}

// enableInParents writes controller (e.g. "+cpu") into the
// subtree_control of every cgroup from mount down to dir's parent.
func enableInParents(mount, dir, controller string) error {
	for parent := mount; parent != dir; {
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(controller), 0o644); err != nil {
			return fmt.Errorf("enabling %s in %s: %w", controller, parent, err)
		}
		rel, _ := filepath.Rel(parent, dir)
		parent = filepath.Join(parent, strings.Split(rel, string(filepath.Separator))[0])
	}
	return nil
}

func writeCgroupFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s of %s to %s: %w", name, dir, value, err)
	}
	return nil
}

// Throttling is what a CPU cap cost the cgroup's processes so far.
type Throttling struct {
	Periods, ThrottledPeriods int64         // CFS periods with runnable tasks, and those that hit the cap
	Throttled                 time.Duration // time runnable but held back by the cap
}

// Sub is the throttling between earlier and t.
func (t Throttling) Sub(earlier Throttling) Throttling {
	return Throttling{Periods: t.Periods - earlier.Periods, ThrottledPeriods: t.ThrottledPeriods - earlier.ThrottledPeriods,
		Throttled: t.Throttled - earlier.Throttled}
}

// ReadThrottling reads cgroup p's cpu.stat.
func ReadThrottling(mount, p string) (Throttling, error) {
	file := filepath.Join(cpuDir(mount, p), "cpu.stat")
	data, err := os.ReadFile(file)
	if err != nil {
		return Throttling{}, err
	}
	t, err := ParseCPUStat(string(data))
	if err != nil {
		return Throttling{}, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

// ParseCPUStat reads a cpu.stat text of either version: v1 gives
// throttled_time in nanoseconds, v2 throttled_usec.
func ParseCPUStat(text string) (Throttling, error) {
	var t Throttling
	seen := 0
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return Throttling{}, fmt.Errorf("%s %q: not a number", key, val)
		}
		switch key {
		case "nr_periods":
			t.Periods, seen = n, seen+1
		case "nr_throttled":
			t.ThrottledPeriods, seen = n, seen+1
		case "throttled_time":
			t.Throttled, seen = time.Duration(n), seen+1
		case "throttled_usec":
			t.Throttled, seen = time.Duration(n)*time.Microsecond, seen+1
		}
	}
	if seen != 3 {
		return Throttling{}, fmt.Errorf("want nr_periods, nr_throttled and throttled_time or throttled_usec in %q", text)
	}
	return t, nil
}

// RemoveCPU removes cgroup p from the cpu hierarchy once its processes
// have exited (a cgroup directory is removed with rmdir, its files with it).
func RemoveCPU(mount, p string) error {
	if err := os.Remove(cpuDir(mount, p)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing cgroup %s: %w", cpuDir(mount, p), err)
	}
	return nil
}
