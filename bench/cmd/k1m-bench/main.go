// Command k1m-bench compares the stock Kubernetes build with the k1m build
// on the load that limits cluster size (make bench, make bench-full; see
// docs/performance.md). `k1m-bench etcd` is the etcd member it starts as a
// child process, so the member's CPU and memory can be measured apart.
// `--scenarios scaleout`, only when named, floods local clusters of three
// and of one k1m server instead.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k1m.dev/k1m/bench/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Main(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "k1m-bench:", err)
		os.Exit(1)
	}
}
