package proc

import (
	"errors"
	"fmt"
	"syscall"
)

// RaiseFileLimit raises this process's open file limit to want: the
// simulated nodes of a benchmark hold tens of thousands of sockets (three
// per connection when they go through in-process load balancers). Past
// the hard limit it needs root (CAP_SYS_RESOURCE), and the kernel's
// fs.nr_open caps it; without root it raises the soft limit to the hard
// one. It returns the limit in force.
func RaiseFileLimit(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("reading the open file limit: %w", err)
	}
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	raised := syscall.Rlimit{Cur: want, Max: max(want, lim.Max)}
	err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
		// Not root, or want is past fs.nr_open: the hard limit is what
		// this process may have.
		raised = syscall.Rlimit{Cur: max(lim.Cur, min(want, lim.Max)), Max: lim.Max}
		err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised)
	}
	if err != nil {
		return lim.Cur, fmt.Errorf("raising the open file limit from %d to %d: %w", lim.Cur, want, err)
	}
	return raised.Cur, nil
}
