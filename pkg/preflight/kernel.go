package preflight

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KernelProblem is one thing a node needs from its kernel that is missing,
// with how to get it.
type KernelProblem struct {
	What, Fix string
}

func (p KernelProblem) String() string { return p.What + ": " + p.Fix }

// ErrKernel is a kernel that lacks what a node needs.
var ErrKernel = errors.New("this kernel lacks what a k1m node needs")

// The cgroup controllers the kubelet and runc need, for each cgroup version.
var (
	cgroupV1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices"}
	cgroupV2Controllers = []string{"cpu", "cpuset", "memory", "pids"}
)

const modulesLoad = "/etc/modules-load.d/k1m.conf"

// Kernel checks, under root ("/" on a real machine), what a node needs
// from its kernel: overlay (containerd's snapshotter), br_netfilter (pod
// traffic through the bridge seen by ip6tables: Services), IPv6 with
// forwarding possible, and the cgroup controllers. It returns every
// problem at once, wrapped in ErrKernel, each with its fix.
func Kernel(root string) error {
	var problems []KernelProblem
	if !hasFilesystem(root, "overlay") {
		problems = append(problems, moduleProblem("overlay", "the overlay file system (missing from /proc/filesystems)"))
	}
	if !exists(root, "proc/sys/net/bridge/bridge-nf-call-ip6tables") {
		problems = append(problems, moduleProblem("br_netfilter", "bridge netfilter (no /proc/sys/net/bridge/bridge-nf-call-ip6tables)"))
	}
	problems = append(problems, ipv6Problems(root)...)
	problems = append(problems, cgroupProblems(root)...)
	if len(problems) == 0 {
		return nil
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = "  - " + p.String()
	}
	return fmt.Errorf("%w:\n%s", ErrKernel, strings.Join(lines, "\n"))
}

func moduleProblem(module, what string) KernelProblem {
	return KernelProblem{What: what, Fix: fmt.Sprintf("load it with `modprobe %s`, and add %s to %s so that it loads at boot", module, module, modulesLoad)}
}

func ipv6Problems(root string) []KernelProblem {
	if !exists(root, "proc/sys/net/ipv6") {
		return []KernelProblem{{What: "IPv6 (no /proc/sys/net/ipv6)", Fix: "k1m is IPv6-only: boot without ipv6.disable=1"}}
	}
	if read(root, "proc/sys/net/ipv6/conf/all/disable_ipv6") == "1" {
		return []KernelProblem{{What: "IPv6 is disabled (net.ipv6.conf.all.disable_ipv6 = 1)", Fix: "k1m is IPv6-only: sysctl -w net.ipv6.conf.all.disable_ipv6=0, and drop the setting from /etc/sysctl.d"}}
	}
	if read(root, "proc/sys/net/ipv6/conf/all/forwarding") != "1" && !writable(filepath.Join(root, "proc/sys/net/ipv6/conf/all/forwarding")) {
		return []KernelProblem{{What: "IPv6 forwarding is off and k1m cannot turn it on (net.ipv6.conf.all.forwarding is read-only here)", Fix: "sysctl -w net.ipv6.conf.all.forwarding=1 where it is allowed (the host, or the container's runtime), and put it in /etc/sysctl.d"}}
	}
	return nil
}

func cgroupProblems(root string) []KernelProblem {
	var missing []string
	if controllers := read(root, "sys/fs/cgroup/cgroup.controllers"); controllers != "" || exists(root, "sys/fs/cgroup/cgroup.controllers") {
		have := map[string]bool{}
		for _, c := range strings.Fields(controllers) {
			have[c] = true
		}
		for _, c := range cgroupV2Controllers {
			if !have[c] {
				missing = append(missing, c)
			}
		}
	} else {
		enabled := cgroupV1Enabled(read(root, "proc/cgroups"))
		for _, c := range cgroupV1Controllers {
			if !enabled[c] {
				missing = append(missing, c)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []KernelProblem{{
		What: "cgroup controllers " + strings.Join(missing, ", ") + " are not enabled",
		Fix:  "enable them on the kernel command line (for example cgroup_enable=memory, and no cgroup_disable= for them) and reboot",
	}}
}

// cgroupV1Enabled reads /proc/cgroups: a v1 controller is usable when it
// is enabled and mounted (a hierarchy other than 0).
func cgroupV1Enabled(procCgroups string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(procCgroups, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || strings.HasPrefix(f[0], "#") {
			continue
		}
		out[f[0]] = f[1] != "0" && f[3] == "1"
	}
	return out
}

func hasFilesystem(root, name string) bool {
	for _, line := range strings.Split(read(root, "proc/filesystems"), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == name {
			return true
		}
	}
	return false
}

func exists(root, path string) bool {
	_, err := os.Stat(filepath.Join(root, path))
	return err == nil
}

func read(root, path string) string {
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func writable(path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	return f.Close() == nil
}
