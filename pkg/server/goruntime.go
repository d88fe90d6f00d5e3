package server

import (
	"os"
	"strings"

	"k1m.dev/k1m/pkg/multicall"
)

// stackStartSetting makes a new goroutine start with the stack size the
// server's goroutines grow to on average (the Go runtime's
// adaptivestackstart, measured at each GC) instead of 2 KiB. kube-apiserver
// serves every request in fresh goroutines (HTTP/2's handler, the timeout
// filter's, the etcd client's gRPC stream) that each grew their stack by
// copying it several times: about a tenth of the server's CPU under a
// flood of Lease renewals (docs/performance.md). The runtime reads it only
// at process start.
const stackStartSetting = "adaptivestackstart"

// withGoDebug is environ with name=1 added to GODEBUG, unless GODEBUG
// already sets name (the operator's value stays); added tells whether it
// changed anything.
func withGoDebug(environ []string, name string) (env []string, added bool) {
	env = make([]string, 0, len(environ)+1)
	found := false
	for _, kv := range environ {
		value, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			env = append(env, kv)
			continue
		}
		found = true
		if goDebugSets(value, name) {
			env = append(env, kv)
			continue
		}
		if value != "" {
			value += ","
		}
		env = append(env, "GODEBUG="+value+name+"=1")
		added = true
	}
	if !found {
		env = append(env, "GODEBUG="+name+"=1")
		added = true
	}
	return env, added
}

func goDebugSets(value, name string) bool {
	for _, setting := range strings.Split(value, ",") {
		if key, _, _ := strings.Cut(setting, "="); key == name {
			return true
		}
	}
	return false
}

// goRuntimeEnv is the environment the server's process should start with:
// the k1m build's Go runtime settings added (none in the stock build, which
// runs as kubeadm's components do).
func goRuntimeEnv() ([]string, bool) {
	if !tuneGoRuntime {
		return os.Environ(), false
	}
	return withGoDebug(os.Environ(), stackStartSetting)
}

// phaseGoRuntime starts the server again (exec, same PID) with the Go
// runtime settings that only apply from a process's start, unless it
// started with them (after phaseMemory's own start in its cgroup, which
// adds them too).
func (s *Server) phaseGoRuntime() error {
	env, added := goRuntimeEnv()
	if !added {
		return nil
	}
	s.step("starting again with GODEBUG=%s=1, which the Go runtime reads only at start: new goroutines begin with the stack size goroutines grow to", stackStartSetting)
	return multicall.ExecSelf(env)
}
