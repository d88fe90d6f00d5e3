package server

import (
	"math"
	"reflect"
	"testing"
)

func TestPlanMemory(t *testing.T) {
	const gi = int64(1) << 30
	for _, tc := range []struct {
		name                   string
		physical, cgroup, flag int64
		agent                  bool
		want                   memoryPlan
	}{
		{"agent, no limit: a quarter", 24 * gi, 0, 0, true,
			memoryPlan{24 * gi, 6 * gi, "a quarter of the machine, at least 2 GiB and at most half: the server shares it with pods", "/k1m-control-plane/n1"}},
		{"agent, small machine: at least 2 GiB", 6 * gi, 0, 0, true,
			memoryPlan{6 * gi, 2 * gi, "a quarter of the machine, at least 2 GiB and at most half: the server shares it with pods", "/k1m-control-plane/n1"}},
		{"agent, tiny machine: at most half", 3 * gi, 0, 0, true,
			memoryPlan{3 * gi, 3 * gi / 2, "a quarter of the machine, at least 2 GiB and at most half: the server shares it with pods", "/k1m-control-plane/n1"}},
		{"systemd MemoryMax wins over the rule", 24 * gi, 8 * gi, 0, true,
			memoryPlan{24 * gi, 8 * gi, "the cgroup k1m runs in (systemd MemoryMax, or its container's)", ""}},
		{"the flag under the cgroup's limit", 24 * gi, 8 * gi, 4 * gi, true,
			memoryPlan{24 * gi, 4 * gi, "--memory-limit", "/k1m-control-plane/n1"}},
		{"the cgroup's limit under the flag", 24 * gi, 8 * gi, 12 * gi, true,
			memoryPlan{24 * gi, 8 * gi, "the cgroup k1m runs in (systemd MemoryMax, or its container's), under --memory-limit", ""}},
		{"a cgroup limit over the machine is none", 24 * gi, 64 * gi, 0, true,
			memoryPlan{24 * gi, 6 * gi, "a quarter of the machine, at least 2 GiB and at most half: the server shares it with pods", "/k1m-control-plane/n1"}},
		{"no agent: no limit", 24 * gi, 0, 0, false,
			memoryPlan{24 * gi, 0, "none: with --disable-agent the machine is the control plane's", ""}},
		{"no agent, the flag", 24 * gi, 0, 16 * gi, false,
			memoryPlan{24 * gi, 16 * gi, "--memory-limit", "/k1m-control-plane/n1"}},
	} {
		if got := planMemory(tc.physical, tc.cgroup, tc.flag, tc.agent, "/k1m-control-plane/n1"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestMemoryPlanLogLine(t *testing.T) {
	p := memoryPlan{24 << 30, 6 << 30, "a quarter of the machine, at least 2 GiB and at most half: the server shares it with pods", "/k1m-control-plane/n1"}
	want := "memory: machine 24.0 GiB; control plane limit 6.0 GiB (a quarter of the machine, at least 2 GiB and at most half: the server shares it with pods), in cgroup /k1m-control-plane/n1; the node's kubelet reserves it (kube-reserved), so pods are not scheduled into it"
	if got := p.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestShareGoMemory(t *testing.T) {
	const gi = int64(1) << 30
	for _, tc := range []struct {
		limit int64
		want  goMemoryShares
	}{
		{10 * gi, goMemoryShares{Server: 10*gi - 10*gi/100*25 - 10*gi/100*15, ControllerManager: 10 * gi / 100 * 25, Scheduler: 10 * gi / 100 * 15}},
		{math.MaxInt64, goMemoryShares{}}, // the Go runtime's "no limit"
		{0, goMemoryShares{}},
	} {
		got := shareGoMemory(tc.limit)
		if got != tc.want {
			t.Errorf("shareGoMemory(%d) = %+v, want %+v", tc.limit, got, tc.want)
		}
		if sum := got.Server + got.ControllerManager + got.Scheduler; got.Server != 0 && sum != tc.limit {
			t.Errorf("shareGoMemory(%d) shares %d in all", tc.limit, sum)
		}
	}
}

func TestGoMemorySharesLogLineAndEnv(t *testing.T) {
	g := shareGoMemory(4 << 30)
	want := "Go memory limit 4096 MiB shared: this process 2457 MiB, kube-controller-manager 1023 MiB, kube-scheduler 614 MiB (GOMEMLIMIT)"
	if got := g.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got, want := goMemoryLimitEnv(g.Scheduler), []string{"GOMEMLIMIT=644245080"}; !reflect.DeepEqual(got, want) {
		t.Errorf("goMemoryLimitEnv = %q, want %q", got, want)
	}
	if got := goMemoryLimitEnv(0); got != nil {
		t.Errorf("goMemoryLimitEnv(0) = %q, want none", got)
	}
}
