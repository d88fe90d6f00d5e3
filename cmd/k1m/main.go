// Command k1m is the single k1m binary: it runs Kubernetes components
// (k1m kube-apiserver ..., or through a link named after one) and k1m's own
// commands.
package main

import (
	"os"

	"k1m.dev/k1m/pkg/cli"
	"k1m.dev/k1m/pkg/multicall"
)

func main() {
	if name, args, ok := multicall.Lookup(os.Args); ok {
		os.Exit(multicall.Run(name, args))
	}
	os.Exit(cli.Run(os.Args[1:]))
}
