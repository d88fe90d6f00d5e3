// Command k1m-docker-runc is the runtime hack/docker.sh registers as
// dockerd's default on hosts whose root lacks CAP_SYS_RESOURCE: it drops
// that capability from a container's OCI config or exec process
// (test/runcshim), then runs
// the real runc with the same arguments.
package main

import (
	"fmt"
	"os"
	"syscall"

	"k1m.dev/k1m/test/runcshim"
)

// runcPaths are where Debian's runc package and upstream's install put it.
var runcPaths = []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"}

func main() {
	runc := os.Getenv("K1M_REAL_RUNC")
	for _, p := range runcPaths {
		if _, err := os.Stat(p); runc == "" && err == nil {
			runc = p
		}
	}
	if runc == "" {
		fmt.Fprintf(os.Stderr, "k1m-docker-runc: no runc in %v: apt-get install runc\n", runcPaths)
		os.Exit(1)
	}
	if spec := runcshim.SpecFile(os.Args[1:]); spec != "" {
		if err := runcshim.Rewrite(spec); err != nil {
			fmt.Fprintf(os.Stderr, "k1m-docker-runc: dropping %s from %s: %v\n", runcshim.Capability, spec, err)
			os.Exit(1)
		}
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "k1m-docker-runc: running %s: %v\n", runc, err)
	os.Exit(1)
}
