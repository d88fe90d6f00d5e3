// Command k1m-conformance runs the upstream conformance suite against a
// cluster as Sonobuoy does (make conformance; docs/conformance.md). Its
// `worker` subcommand is the sidecar inside the conformance pod.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k1m.dev/k1m/conformance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := conformance.Main(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "k1m-conformance:", err)
		os.Exit(1)
	}
}
