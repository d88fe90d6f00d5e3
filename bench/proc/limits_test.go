package proc

import (
	"syscall"
	"testing"
)

func TestRaiseFileLimitKeepsALimitHighEnough(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	got, err := RaiseFileLimit(lim.Cur)
	if err != nil || got != lim.Cur {
		t.Errorf("RaiseFileLimit(%d) = %d, %v; want the limit as it is", lim.Cur, got, err)
	}
	// Up to the hard limit needs no privilege.
	got, err = RaiseFileLimit(lim.Max)
	if err != nil || got != lim.Max {
		t.Errorf("RaiseFileLimit(%d), the hard limit = %d, %v", lim.Max, got, err)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil || now.Cur != lim.Max {
		t.Errorf("soft limit now %d (%v), want %d", now.Cur, err, lim.Max)
	}
}
