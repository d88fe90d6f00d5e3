package preflight

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeRoot writes files under a temporary root: path -> content.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const procCgroupsV1 = `#subsys_name	hierarchy	num_cgroups	enabled
cpuset	3	2	1
cpu	1	2	1
cpuacct	2	2	1
memory	4	55	1
devices	5	2	1
pids	8	2	1
`

func goodKernel() map[string]string {
	return map[string]string{
		"proc/filesystems": "nodev\tsysfs\nnodev\ttmpfs\n\text4\nnodev\toverlay\n",
		"proc/sys/net/bridge/bridge-nf-call-ip6tables": "1\n",
		"proc/sys/net/ipv6/conf/all/disable_ipv6":      "0\n",
		"proc/sys/net/ipv6/conf/all/forwarding":        "1\n",
		"proc/cgroups":                                 procCgroupsV1,
	}
}

func TestKernelGood(t *testing.T) {
	if err := Kernel(fakeRoot(t, goodKernel())); err != nil {
		t.Fatalf("a kernel with everything: %v", err)
	}
	v2 := goodKernel()
	delete(v2, "proc/cgroups")
	v2["sys/fs/cgroup/cgroup.controllers"] = "cpuset cpu io memory hugetlb pids rdma misc\n"
	if err := Kernel(fakeRoot(t, v2)); err != nil {
		t.Fatalf("a cgroup v2 kernel with everything: %v", err)
	}
}

// TestKernelNamesEveryProblem removes overlay and br_netfilter, and the
// memory controller (v1: unmounted; v2: absent), and wants one error that
// names each with its fix.
func TestKernelNamesEveryProblem(t *testing.T) {
	k := goodKernel()
	k["proc/filesystems"] = "nodev\tsysfs\n\text4\n"
	delete(k, "proc/sys/net/bridge/bridge-nf-call-ip6tables")
	k["proc/cgroups"] = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t2\t1\ncpu\t1\t2\t1\ncpuacct\t2\t2\t1\nmemory\t0\t1\t1\ndevices\t5\t2\t1\npids\t8\t2\t1\n"
	err := Kernel(fakeRoot(t, k))
	want := ErrKernel.Error() + ":\n" +
		"  - the overlay file system (missing from /proc/filesystems): load it with `modprobe overlay`, and add overlay to /etc/modules-load.d/k1m.conf so that it loads at boot\n" +
		"  - bridge netfilter (no /proc/sys/net/bridge/bridge-nf-call-ip6tables): load it with `modprobe br_netfilter`, and add br_netfilter to /etc/modules-load.d/k1m.conf so that it loads at boot\n" +
		"  - cgroup controllers memory are not enabled: enable them on the kernel command line (for example cgroup_enable=memory, and no cgroup_disable= for them) and reboot"
	if !errors.Is(err, ErrKernel) || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}

	v2 := goodKernel()
	delete(v2, "proc/cgroups")
	v2["sys/fs/cgroup/cgroup.controllers"] = "cpuset cpu io pids\n"
	err = Kernel(fakeRoot(t, v2))
	want = ErrKernel.Error() + ":\n  - cgroup controllers memory are not enabled: enable them on the kernel command line (for example cgroup_enable=memory, and no cgroup_disable= for them) and reboot"
	if err == nil || err.Error() != want {
		t.Fatalf("cgroup v2 without memory: got %v\nwant %s", err, want)
	}
}

func TestKernelIPv6(t *testing.T) {
	off := goodKernel()
	off["proc/sys/net/ipv6/conf/all/disable_ipv6"] = "1\n"
	want := ErrKernel.Error() + ":\n  - IPv6 is disabled (net.ipv6.conf.all.disable_ipv6 = 1): k1m is IPv6-only: sysctl -w net.ipv6.conf.all.disable_ipv6=0, and drop the setting from /etc/sysctl.d"
	if err := Kernel(fakeRoot(t, off)); err == nil || err.Error() != want {
		t.Errorf("IPv6 disabled: got %v\nwant %s", err, want)
	}
	none := goodKernel()
	for path := range none {
		if filepath.Dir(filepath.Dir(filepath.Dir(path))) == "proc/sys/net/ipv6" {
			delete(none, path)
		}
	}
	want = ErrKernel.Error() + ":\n  - IPv6 (no /proc/sys/net/ipv6): k1m is IPv6-only: boot without ipv6.disable=1"
	if err := Kernel(fakeRoot(t, none)); err == nil || err.Error() != want {
		t.Errorf("no IPv6: got %v\nwant %s", err, want)
	}
}

// TestThisMachine: the machine the tests run on runs nodes, so it passes.
func TestThisMachine(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the forwarding sysctl is writable by root only")
	}
	if err := Kernel("/"); err != nil {
		t.Fatal(err)
	}
}
