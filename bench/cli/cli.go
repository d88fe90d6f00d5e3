// Package cli parses k1m-bench's command line: bench profiles of defaults
// (quick for make bench, full for make bench-full) that single flags
// override, checked before anything starts.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"k1m.dev/k1m/bench"
	"k1m.dev/k1m/bench/controlplane"
	"k1m.dev/k1m/bench/creates"
	"k1m.dev/k1m/bench/nodesim"
	"k1m.dev/k1m/pkg/etcd"
)

// Main runs a subcommand.
func Main(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: run (the benchmarks), creates (Service against ConfigMap creates on a running cluster), etcd or simulate-nodes (internal: one etcd member, the node ramp's kubelets)")
	}
	// client-go logs every request cut short when a flood stops; the
	// benchmark's own progress is what the user reads.
	klog.SetLogger(logr.Discard())
	switch args[0] {
	case "run":
		o, err := ParseRun(args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the flag package printed the usage
		}
		if err != nil {
			return err
		}
		return bench.Run(ctx, o)
	case "creates":
		return runCreates(ctx, args[1:])
	case "etcd":
		return runEtcd(ctx, args[1:])
	case "simulate-nodes":
		return runNodeSimulator(ctx, args[1:])
	}
	return fmt.Errorf("unknown subcommand %q: want run, creates, etcd or simulate-nodes", args[0])
}

// runCreates times Service and ConfigMap creates on the cluster of
// --kubeconfig (package creates).
func runCreates(ctx context.Context, args []string) error {
	cfg, kubeconfig, err := parseCreates(args)
	if err != nil {
		return err
	}
	rest, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	// The creates in flight, not the client's rate limit, set the pace.
	rest.QPS, rest.Burst = 10000, 10000
	client, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return err
	}
	_, err = creates.Run(ctx, cfg, client, func(line string) { fmt.Println(line) })
	return err
}

// parseCreates reads and checks `k1m-bench creates`'s flags.
func parseCreates(args []string) (creates.Config, string, error) {
	fs := flag.NewFlagSet("creates", flag.ContinueOnError)
	cfg := creates.Config{}
	kubeconfig, parallel := "", "1,20"
	fs.StringVar(&kubeconfig, "kubeconfig", kubeconfig, "the cluster's admin kubeconfig, e.g. /var/lib/k1m/server/admin.kubeconfig")
	fs.IntVar(&cfg.Count, "count", 200, "objects of each kind created at each parallelism")
	fs.StringVar(&parallel, "parallel", parallel, "creates in flight, one measurement each, comma-separated")
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	errs := []error{requireNumbers("--parallel", parallel, "1,20")}
	if kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig is empty: want the cluster's admin kubeconfig, e.g. /var/lib/k1m/server/admin.kubeconfig"))
	}
	if errs[0] == nil {
		cfg.Parallel = parseCounts(parallel)
		errs = append(errs, cfg.Validate())
	}
	return cfg, kubeconfig, errors.Join(errs...)
}

// runEtcd is one etcd member in the foreground until SIGTERM.
func runEtcd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	m := etcd.Member{Host: "::1"}
	fs.StringVar(&m.Name, "name", "etcd", "member name")
	fs.StringVar(&m.DataDir, "data-dir", "", "data directory")
	fs.IntVar(&m.Port, "port", 2379, "client port (peer: port+1)")
	fs.BoolVar(&m.NoFsync, "unsafe-no-fsync", false, "skip fsync")
	fs.BoolVar(&m.Pprof, "pprof", false, "serve /debug/pprof on the client URL (CPU profiles of the benchmark)")
	fs.StringVar(&m.TLS.CAFile, "ca", "", "client CA")
	fs.StringVar(&m.TLS.CertFile, "cert", "", "serving certificate")
	fs.StringVar(&m.TLS.KeyFile, "key", "", "serving key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if m.DataDir == "" {
		return errors.New("--data-dir is empty: want a directory")
	}
	r, err := etcd.Start(ctx, m)
	if err != nil {
		return err
	}
	defer r.Stop()
	select {
	case <-ctx.Done():
		return nil
	case err := <-r.Err():
		return err
	}
}

// runNodeSimulator is the node ramp's kubelets (package nodesim): it
// takes commands on stdin and answers on stdout until stdin ends.
func runNodeSimulator(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("simulate-nodes", flag.ContinueOnError)
	kubeconfigPath := fs.String("kubeconfig", "", "the API server's kubeconfig")
	cfg := nodesim.Defaults()
	fs.DurationVar(&cfg.RenewInterval, "renew-interval", cfg.RenewInterval, "Lease renew interval")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", cfg.LeaseDuration, "the Leases' duration")
	fs.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "node status report interval (the kubelet's nodeStatusReportFrequency)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "heartbeats in flight at most")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfigPath == "" {
		return errors.New("--kubeconfig is empty: want the API server's kubeconfig")
	}
	restCfg, err := controlplane.ClientConfig(*kubeconfigPath)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	sim, err := nodesim.New(restCfg, cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go sim.Run(ctx)
	return nodesim.Serve(os.Stdin, os.Stdout, sim)
}
