package server

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"

	"golang.org/x/sys/unix"

	"k1m.dev/k1m/pkg/cgroups"
	"k1m.dev/k1m/pkg/multicall"
)

// The sizing rule of a server that runs a node agent and so shares its
// machine with pods: a quarter of the machine's memory for the control
// plane, at least minControlPlaneMemory but never over half the machine.
const (
	controlPlaneShare     = 4 // 1/4 of the machine
	minControlPlaneMemory = 2 << 30
)

// memoryPlan is how much memory the control plane may use and how that
// was decided. Limit is what GOMEMLIMIT follows (patch 0002) and what the
// server's kubelet reserves (kube-reserved), so that pods are not
// scheduled into it.
type memoryPlan struct {
	Physical int64
	Limit    int64  // 0: no limit (the machine is the control plane's)
	Source   string // why Limit
	Cgroup   string // the cgroup to confine the server to; "" if none
}

// planMemory applies the rule: --memory-limit, else a limit the server
// already runs under (systemd's MemoryMax, a container's), else with a
// node agent a quarter of the machine in k1m's own cgroup, else none.
// confineTo is the cgroup to use when the limit is k1m's own
// (cgroups.ConfinePath: one per node name, so that several servers on one
// machine each get their own).
func planMemory(physical, cgroupLimit, flagLimit int64, agent bool, confineTo string) memoryPlan {
	p := memoryPlan{Physical: physical}
	switch {
	case flagLimit > 0 && (cgroupLimit == 0 || flagLimit < cgroupLimit):
		p.Limit, p.Source, p.Cgroup = flagLimit, "--memory-limit", confineTo
	case cgroupLimit > 0 && cgroupLimit < physical:
		p.Limit, p.Source = cgroupLimit, "the cgroup k1m runs in (systemd MemoryMax, or its container's)"
		if flagLimit > 0 {
			p.Source += ", under --memory-limit"
		}
	case agent:
		p.Limit = min(max(physical/controlPlaneShare, minControlPlaneMemory), physical/2)
		p.Source = "a quarter of the machine, at least 2 GiB and at most half: the server shares it with pods"
		p.Cgroup = confineTo
	default:
		p.Source = "none: with --disable-agent the machine is the control plane's"
	}
	return p
}

func (p memoryPlan) String() string {
	if p.Limit == 0 {
		return fmt.Sprintf("memory: machine %s; control plane limit %s", gib(p.Physical), p.Source)
	}
	where := "no cgroup of k1m's own"
	if p.Cgroup != "" {
		where = "in cgroup " + p.Cgroup
	}
	return fmt.Sprintf("memory: machine %s; control plane limit %s (%s), %s; the node's kubelet reserves it (kube-reserved), so pods are not scheduled into it",
		gib(p.Physical), gib(p.Limit), p.Source, where)
}

func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// Set on the server process started again in its own cgroup: the cgroup
// and why, for the log line (the new process sees only a cgroup limit).
const (
	envConfinedTo     = "K1M_CONFINED_TO"
	envConfinedSource = "K1M_CONFINED_SOURCE"
)

// phaseMemory decides the control plane's memory. When the limit is k1m's
// own, the server moves itself into its cgroup and starts again there
// (exec, same PID): patch 0002 then sizes the Go runtime from the limit at
// process start, as it does in every binary, instead of from the whole
// machine; the second start finds the limit and keeps it.
func (s *Server) phaseMemory() error {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return fmt.Errorf("reading the machine's memory: %w", err)
	}
	procCgroup, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return err
	}
	cgroupLimit, err := cgroups.MemoryLimit(cgroups.Mount, string(procCgroup))
	if err != nil {
		return err
	}
	confineTo := cgroups.ConfinePath(cgroups.Mount, string(procCgroup), s.nodeName)
	s.memory = planMemory(int64(info.Totalram)*int64(info.Unit), cgroupLimit, s.cfg.MemoryLimitBytes, !s.cfg.DisableAgent, confineTo)
	if to := os.Getenv(envConfinedTo); to != "" {
		s.memory.Cgroup, s.memory.Source = to, os.Getenv(envConfinedSource)
		os.Unsetenv(envConfinedTo)
		os.Unsetenv(envConfinedSource)
		s.step("%s", s.memory)
		return nil
	}
	if s.memory.Cgroup == "" {
		s.step("%s", s.memory)
		return nil
	}
	if err := cgroups.Confine(cgroups.Mount, s.memory.Cgroup, s.memory.Limit, os.Getpid()); err != nil {
		return fmt.Errorf("confining the control plane to %s of memory: %w (run as root, or start k1m under a memory limit such as systemd's MemoryMax)", gib(s.memory.Limit), err)
	}
	s.step("confined to cgroup %s with %s of memory: starting again in it, so that the Go runtime sizes itself from the limit", s.memory.Cgroup, gib(s.memory.Limit))
	// $K1M_TOKEN was taken out of the environment (config: no child
	// inherits it); the new start still joins with it.
	env := append(append(os.Environ(), s.cfg.RestartEnv()...), envConfinedTo+"="+s.memory.Cgroup, envConfinedSource+"="+s.memory.Source)
	return multicall.ExecSelf(env)
}

// The server's Go memory limit (patch 0002: 90% of the control plane's
// limit; or the operator's GOMEMLIMIT) is shared by the three Go runtimes
// in its cgroup: this process (kube-apiserver, both etcds, the kubelet,
// kube-proxy, k1m's own controllers) and its two children. Left alone,
// each child would size itself from the whole limit. Percent of the limit
// each child gets; this process keeps the rest (60%). The children hold
// informer caches of the objects they act on (the controller-manager
// more kinds, the scheduler Nodes and Pods), a fraction of what
// kube-apiserver's watch caches and the etcds hold.
const (
	controllerManagerGoMemoryPercent = 25
	schedulerGoMemoryPercent         = 15
)

// goMemoryShares is each Go runtime's GOMEMLIMIT in bytes; all 0 when the
// server has no Go memory limit (the stock build with no GOMEMLIMIT, or
// K1M_RUNTIME_TUNING=off): then neither do its children.
type goMemoryShares struct {
	Server, ControllerManager, Scheduler int64
}

func shareGoMemory(limit int64) goMemoryShares {
	if limit <= 0 || limit == math.MaxInt64 {
		return goMemoryShares{}
	}
	kcm := limit / 100 * controllerManagerGoMemoryPercent
	sched := limit / 100 * schedulerGoMemoryPercent
	return goMemoryShares{Server: limit - kcm - sched, ControllerManager: kcm, Scheduler: sched}
}

// shareGoMemory lowers this process's Go memory limit to its share before
// the children start, and returns every share.
func (s *Server) shareGoMemory() goMemoryShares {
	shares := shareGoMemory(debug.SetMemoryLimit(-1))
	if shares.Server == 0 {
		s.step("Go memory limit: none, so none for kube-controller-manager and kube-scheduler either")
		return shares
	}
	debug.SetMemoryLimit(shares.Server)
	s.step("%s", shares)
	return shares
}

func (g goMemoryShares) String() string {
	return fmt.Sprintf("Go memory limit %s shared: this process %s, kube-controller-manager %s, kube-scheduler %s (GOMEMLIMIT)",
		mib(g.Server+g.ControllerManager+g.Scheduler), mib(g.Server), mib(g.ControllerManager), mib(g.Scheduler))
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// goMemoryLimitEnv is a child's environment for its share; the Go runtime
// reads GOMEMLIMIT at start, and patch 0002 keeps a GOMEMLIMIT it finds.
func goMemoryLimitEnv(limit int64) []string {
	if limit == 0 {
		return nil
	}
	return []string{"GOMEMLIMIT=" + strconv.FormatInt(limit, 10)}
}
