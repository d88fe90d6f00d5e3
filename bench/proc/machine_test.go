package proc

import (
	"os"
	"reflect"
	"testing"
	"time"
)

func TestParseMeminfo(t *testing.T) {
	meminfo := "MemTotal:        8000000 kB\nDirty:              1024 kB\nHugePages_Total:       2\n\n"
	want := map[string]int64{"MemTotal": 8000000 << 10, "Dirty": 1 << 20, "HugePages_Total": 2}
	if got := ParseMeminfo(meminfo); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseMeminfo = %v, want %v", got, want)
	}
	if got := ReadMeminfo(); got["MemTotal"] <= 0 {
		t.Errorf("ReadMeminfo()[MemTotal] = %d: want the machine's memory", got["MemTotal"])
	}
}

func TestParseMachineCPU(t *testing.T) {
	// user 100, nice 2, system 50, idle 900, iowait 7, irq 3, softirq 4, steal 1 ticks.
	stat := "cpu  100 2 50 900 7 3 4 1 0 0\ncpu0 50 1 25 450 3 1 2 0 0 0\n"
	busy, iowait, err := ParseMachineCPU(stat)
	if err != nil || busy != 1600*time.Millisecond || iowait != 70*time.Millisecond {
		t.Errorf("ParseMachineCPU = %v, %v, %v; want 1.6s, 70ms", busy, iowait, err)
	}
	if _, _, err := ParseMachineCPU("intr 5\n"); err == nil || err.Error() != `unexpected /proc/stat format: "intr 5"` {
		t.Errorf("ParseMachineCPU(intr) error = %v", err)
	}
}

func TestParseWriteBytes(t *testing.T) {
	io := "rchar: 10\nwchar: 20\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n"
	if got, err := ParseWriteBytes(io); err != nil || got != 8192 {
		t.Errorf("ParseWriteBytes = %d, %v; want 8192", got, err)
	}
	if _, err := ParseWriteBytes("rchar: 10\n"); err == nil || err.Error() != `no write_bytes in /proc/PID/io: "rchar: 10\n"` {
		t.Errorf("ParseWriteBytes without write_bytes: error %v", err)
	}
}

func TestParseStatusResident(t *testing.T) {
	status := "Name:\tetcd\nVmHWM:\t    4096 kB\nVmRSS:\t    3072 kB\nRssAnon:\t    2048 kB\nRssFile:\t     512 kB\nRssShmem:\t     512 kB\n"
	want := Resident{Total: 3 << 20, Anon: 2 << 20, File: 512 << 10, Shmem: 512 << 10}
	if got := ParseStatusResident(status); got != want {
		t.Errorf("ParseStatusResident = %+v, want %+v", got, want)
	}
	r, err := ReadResident(os.Getpid())
	if err != nil || r.Total <= 0 || r.Anon <= 0 {
		t.Errorf("ReadResident(self) = %+v, %v: want resident memory", r, err)
	}
}

func TestSelfCPU(t *testing.T) {
	deadline := time.Now().Add(20 * time.Millisecond)
	for time.Now().Before(deadline) { // burn some CPU so it is not zero
	}
	if cpu, err := SelfCPU(); err != nil || cpu <= 0 {
		t.Errorf("SelfCPU() = %v, %v; want more than 0", cpu, err)
	}
}

func TestDiskstats(t *testing.T) {
	diskstats := "   8       0 sda 100 0 800 10 200 0 4000 20 0 30 30 0 0 0 0\n" +
		" 259       1 nvme0n1p1 5 0 40 1 7 0 16 2 0 3 3\n" +
		"   7       0 loop0 1 0 2\n"
	for _, tc := range []struct {
		major, minor uint32
		want         string
	}{{8, 0, "sda"}, {259, 1, "nvme0n1p1"}, {7, 0, ""}, {8, 1, ""}} {
		if got := DiskstatsName(diskstats, tc.major, tc.minor); got != tc.want {
			t.Errorf("DiskstatsName(%d:%d) = %q, want %q", tc.major, tc.minor, got, tc.want)
		}
	}
	for dev, want := range map[string]int64{"sda": 4000 * 512, "nvme0n1p1": 16 * 512, "loop0": 0, "sdz": 0} {
		if got := DiskstatsWritten(diskstats, dev); got != want {
			t.Errorf("DiskstatsWritten(%s) = %d, want %d", dev, got, want)
		}
	}
	if got := DeviceWritten(""); got != 0 {
		t.Errorf("DeviceWritten(\"\") = %d, want 0", got)
	}
}
