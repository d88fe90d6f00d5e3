// Command k1m-cni is the pod network of k1m's kind node image: a DaemonSet
// that writes each node's CNI config (bridge + host-local on the node's
// IPv6 pod range) and routes the other nodes' pod ranges through them, the
// same code k1m agent runs in process (pkg/podnet). With --network-policy
// it also enforces the node's NetworkPolicy rules, and the instance holding
// the Lease compiles and publishes every node's, as k1m's agents and
// servers do (pkg/netpol).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"k1m.dev/k1m/pkg/elect"
	"k1m.dev/k1m/pkg/netpol"
	"k1m.dev/k1m/pkg/podnet"
)

func main() {
	var opts podnet.Options
	var networkPolicy bool
	fs := pflag.NewFlagSet("k1m-cni", pflag.ContinueOnError)
	opts.AddFlags(fs)
	fs.BoolVar(&networkPolicy, "network-policy", false, "also enforce this node's NetworkPolicy rules, and compile every node's while holding the Lease kube-system/"+netpol.Election)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if networkPolicy {
		if err := runNetworkPolicy(ctx, opts); err != nil {
			fmt.Fprintf(os.Stderr, "k1m-cni: %v\n", err)
			os.Exit(1)
		}
	}
	if err := podnet.RunDaemon(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "k1m-cni: %v\n", err)
		os.Exit(1)
	}
}

// runNetworkPolicy starts the node's enforcer and, for as long as this
// instance holds the Lease, the publisher: one instance in the cluster
// watches every Pod, Namespace and NetworkPolicy; every node watches its
// own rules alone.
func runNetworkPolicy(ctx context.Context, opts podnet.Options) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	go (&netpol.Enforcer{Client: client, Node: opts.NodeName}).Run(ctx)
	go elect.Run(ctx, client, netpol.Election, opts.NodeName, (&netpol.Publisher{Client: client}).Run)
	return nil
}
