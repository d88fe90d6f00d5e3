// Command k1m-cni is the pod network of k1m's kind node image: a DaemonSet
// that writes each node's CNI config (bridge + host-local on the node's
// IPv6 pod range) and routes the other nodes' pod ranges through them, the
// same code k1m agent runs in process (pkg/podnet).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"k1m.dev/k1m/pkg/podnet"
)

func main() {
	var opts podnet.Options
	fs := pflag.NewFlagSet("k1m-cni", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := podnet.RunDaemon(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "k1m-cni: %v\n", err)
		os.Exit(1)
	}
}
