// Command k1m-pause is the pod sandbox ("pause") process of k1m's local
// pause image: it holds the pod's namespaces, reaps orphans re-parented to
// it (it is PID 1 of the pod) and exits on SIGINT or SIGTERM. No image is
// ever pulled in k1m, so the sandbox image is built from this program.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
