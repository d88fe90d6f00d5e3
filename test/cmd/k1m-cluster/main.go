// Command k1m-cluster starts and stops a local k1m cluster (package
// localcluster) for `make cluster`, `make cluster-down` and `make
// conformance`, which build it into _output/tools (hack/cluster.sh does
// the same: hack/cluster.sh VERB [ARGS]). Built, not `go run`: go run
// reports every failure as exit code 1, and run-server and reset-server
// pass on the server's own. Options come from
// the environment (NODES, SERVERS, K1M, CLUSTER_DIR, DATA_ROOT,
// IMAGES_DIR, SERVER_ARGS, AGENT_ARGS, SERVER_MEMORY, POD_ROUTES, TIMEOUT); verbs
// after up default NODES and SERVERS to what up recorded in CLUSTER_DIR.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"k1m.dev/k1m/test/localcluster"
)

const usage = `usage: k1m-cluster up|down|import DIR|restart-server [I]|stop-server [I]|start-server [I]|
                   reset-server [FILE]|run-server FLAGS...|restart-agent I
env: SERVERS (default 1), NODES (default SERVERS; each server is a node too), K1M (binary),
     CLUSTER_DIR (logs, pids), DATA_ROOT (server and node data), IMAGES_DIR,
     SERVER_ARGS (extra k1m server flags), AGENT_ARGS (extra k1m agent flags), SERVER_MEMORY (each server's --memory-limit;
     default 3Gi with several servers), POD_ROUTES (k1m, the default, or provider: the
     servers run with --pod-routes=provider and the host routes each node's pod range),
     TIMEOUT (seconds, default 300)`

// exitUsage is the exit code of a bad command line or option, as the
// shell harness had it.
const exitUsage = 2

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return exitUsage
	}
	c, err := cluster(args[0])
	if err != nil {
		report(err)
		return exitUsage
	}
	err = verb(ctx, c, args[0], args[1:])
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && (args[0] == "reset-server" || args[0] == "run-server"):
		return exit.ExitCode() // the server's own, its output shown already
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, usage)
		return exitUsage
	}
	report(err)
	return 1
}

// report prints err, each of joined errors on a line of its own.
func report(err error) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			report(e)
		}
		return
	}
	fmt.Fprintln(os.Stderr, "cluster:", err)
}

var errUsage = errors.New("usage")

// cluster lays out the cluster of the environment's options.
func cluster(verb string) (*localcluster.Cluster, error) {
	o, err := localcluster.OptionsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if verb != "up" {
		dir := o.ClusterDir
		if dir == "" {
			dir = localcluster.DefaultClusterDir
		}
		if servers, nodes, ok := localcluster.ReadLayout(dir); ok {
			o.Servers = orRecorded(o.Servers, servers)
			o.Nodes = orRecorded(o.Nodes, nodes)
		}
	}
	return localcluster.New(o)
}

// orRecorded is v, or recorded when v is unset.
func orRecorded(v, recorded int) int {
	if v == 0 {
		return recorded
	}
	return v
}

func verb(ctx context.Context, c *localcluster.Cluster, name string, args []string) error {
	switch name {
	case "up":
		return c.Up(ctx)
	case "down":
		return c.Down(ctx)
	case "import":
		if len(args) != 1 {
			return errUsage
		}
		return c.Import(ctx, args[0])
	case "restart-server", "stop-server", "start-server":
		i, err := index(args, 1)
		if err != nil {
			return err
		}
		return map[string]func(context.Context, int) error{
			"restart-server": c.RestartServer, "stop-server": c.StopServer, "start-server": c.StartServer,
		}[name](ctx, i)
	case "reset-server":
		if len(args) > 1 {
			return errUsage
		}
		return c.ResetServer(ctx, os.Stdout, append(args, "")[0])
	case "run-server":
		return c.RunServer(ctx, os.Stdout, args...)
	case "restart-agent":
		if len(args) != 1 {
			return errUsage
		}
		i, err := index(args, 0)
		if err != nil {
			return err
		}
		return c.RestartAgent(ctx, i)
	}
	return errUsage
}

// index reads an optional index argument, def when absent.
func index(args []string, def int) (int, error) {
	switch len(args) {
	case 0:
		return def, nil
	case 1:
		i, err := strconv.Atoi(args[0])
		if err != nil || i < 1 {
			return 0, fmt.Errorf("%q: want an index from 1", args[0])
		}
		return i, nil
	}
	return 0, errUsage
}
