package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// What Usage leaves out, for measurements of storage: the machine's
// memory by kind and its CPU, a process's resident memory by kind and
// the bytes it wrote, this process's CPU, and block devices' writes.

// ReadMeminfo reads /proc/meminfo: every field in bytes (counts such as
// HugePages_Total as they are); empty when it cannot be read.
func ReadMeminfo() map[string]int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return map[string]int64{}
	}
	return ParseMeminfo(string(data))
}

// ParseMeminfo parses the text of /proc/meminfo: kB fields in bytes.
func ParseMeminfo(meminfo string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(meminfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		if len(f) == 3 && f[2] == "kB" {
			v <<= 10
		}
		out[strings.TrimSuffix(f[0], ":")] = v
	}
	return out
}

// ReadMachineCPU reads the CPU time of all the machine's CPUs since boot
// from /proc/stat: busy (user, nice, system, irq, softirq, steal: the
// kernel's writeback threads too, which no process is charged for) and
// iowait.
func ReadMachineCPU() (busy, iowait time.Duration, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return ParseMachineCPU(string(data))
}

// ParseMachineCPU reads busy and iowait from the text of /proc/stat (its
// first line: cpu user nice system idle iowait irq softirq steal ...).
func ParseMachineCPU(stat string) (busy, iowait time.Duration, err error) {
	f := strings.Fields(strings.SplitN(stat, "\n", 2)[0])
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat format: %q", strings.SplitN(stat, "\n", 2)[0])
	}
	ticks := func(i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * time.Second / clockTicks
	}
	return ticks(1) + ticks(2) + ticks(3) + ticks(6) + ticks(7) + ticks(8), ticks(5), nil
}

// ReadWriteBytes reads write_bytes of /proc/PID/io: the bytes pid caused
// to be written to storage (page cache it dirtied on a file system with a
// device; nothing on a tmpfs).
func ReadWriteBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	return ParseWriteBytes(string(data))
}

// ParseWriteBytes reads write_bytes from the text of /proc/PID/io.
func ParseWriteBytes(io string) (int64, error) {
	for _, line := range strings.Split(io, "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no write_bytes in /proc/PID/io: %q", io)
}

// Resident is a process's resident memory, bytes, by kind.
type Resident struct {
	Total, Anon, File, Shmem int64 // VmRSS, RssAnon, RssFile, RssShmem
}

// ReadResident reads pid's resident memory by kind from /proc/PID/status.
func ReadResident(pid int) (Resident, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Resident{}, err
	}
	return ParseStatusResident(string(data)), nil
}

// ParseStatusResident reads VmRSS, RssAnon, RssFile and RssShmem from
// the text of /proc/PID/status; a field it lacks is 0.
func ParseStatusResident(status string) Resident {
	var r Resident
	fields := map[string]*int64{"VmRSS": &r.Total, "RssAnon": &r.Anon, "RssFile": &r.File, "RssShmem": &r.Shmem}
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if dst, ok := fields[strings.TrimSuffix(f[0], ":")]; ok {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			*dst = kb << 10
		}
	}
	return r
}

// SelfCPU is this process's user and system CPU time, from getrusage:
// finer than the clock ticks of /proc/PID/stat.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// BlockDevice names the block device that holds path as /proc/diskstats
// does ("" for a tmpfs, or a device diskstats does not list).
func BlockDevice(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	data, _ := os.ReadFile("/proc/diskstats")
	return DiskstatsName(string(data), unix.Major(st.Dev), unix.Minor(st.Dev))
}

// DiskstatsName is the name of device major:minor in the text of
// /proc/diskstats; "" if it is not there.
func DiskstatsName(diskstats string, major, minor uint32) string {
	for _, line := range strings.Split(diskstats, "\n") {
		f := strings.Fields(line)
		if len(f) > 10 && f[0] == strconv.FormatUint(uint64(major), 10) && f[1] == strconv.FormatUint(uint64(minor), 10) {
			return f[2]
		}
	}
	return ""
}

// DeviceWritten is the bytes written to device dev (a /proc/diskstats
// name) since boot; 0 for "" or a device it does not list.
func DeviceWritten(dev string) int64 {
	if dev == "" {
		return 0
	}
	data, _ := os.ReadFile("/proc/diskstats")
	return DiskstatsWritten(string(data), dev)
}

// DiskstatsWritten is the bytes written to device dev in the text of
// /proc/diskstats (its sectors written, of 512 bytes).
func DiskstatsWritten(diskstats, dev string) int64 {
	for _, line := range strings.Split(diskstats, "\n") {
		f := strings.Fields(line)
		if len(f) > 10 && f[2] == dev {
			sectors, _ := strconv.ParseInt(f[9], 10, 64)
			return sectors * 512
		}
	}
	return 0
}
