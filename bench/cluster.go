package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/scaleout"
)

// runCluster loads one fresh `k1m server` of each build per round with
// simulated nodes and Deployments at each node count. Each round's steps
// are written as soon as they are in.
func runCluster(ctx context.Context, o Options, rep *Report) error {
	rep.Cluster = &clusterload.Result{Config: o.Cluster}
	return eachFresh(ctx, o, "cluster", clusterVariants(o), func(c *scaleout.Cluster, flavour string, round int) error {
		progress := func(line string) { fmt.Fprintf(o.Progress, "  %s, round %d: %s\n", flavour, round, line) }
		env := clusterload.Env{Config: c.Config(1), ServerPID: c.ServerPID(1), ServerLog: c.LogFile(1), ProfileDir: filepath.Dir(c.LogFile(1)), Progress: progress,
			Restart: func(ctx context.Context) (int, error) { return c.RestartServer(ctx, 1) }}
		if o.Cluster.Servers > 1 {
			env.BalancerLog = filepath.Join(filepath.Dir(c.LogFile(1)), "balancers.log")
			for k := 1; k <= o.Cluster.Servers; k++ {
				env.Servers = append(env.Servers, clusterload.Server{Config: c.Config(k), PID: c.ServerPID(k),
					Restart: func(ctx context.Context) (int, error) { return c.RestartServer(ctx, k) }})
			}
		}
		steps, err := clusterload.Run(ctx, o.Cluster, env)
		for _, s := range steps {
			s.Flavour, s.Round = flavour, round
			rep.Cluster.Steps = append(rep.Cluster.Steps, s)
		}
		return errors.Join(err, rep.writeData())
	})
}

// clusterVariants are the two builds (with --cluster-partitions the k1m
// build partitioned too), or with --cluster-syncs the k1m build at each
// controller worker count, or with --cluster-route-events at each route
// event budget; with --cluster-join-profile
// their API servers' profiling is on.
func clusterVariants(o Options) []serverVariant {
	var out []serverVariant
	if len(o.Cluster.Syncs) == 0 && len(o.Cluster.RouteEvents) == 0 {
		out = buildVariants(o)
	}
	if len(o.Cluster.Partitions) > 0 {
		out = append(out, serverVariant{Name: clusterload.PartitionedVariant, K1M: o.Deployed.Binary(deployed.K1m), Args: clusterload.PartitionArgs(o.Cluster.Partitions)})
	}
	for _, n := range o.Cluster.Syncs {
		out = append(out, serverVariant{Name: fmt.Sprintf("k1m-syncs-%d", n), K1M: o.Deployed.Binary(deployed.K1m), Args: clusterload.ControllerSyncArgs(n)})
	}
	for _, n := range o.Cluster.RouteEvents {
		out = append(out, serverVariant{Name: fmt.Sprintf("k1m-route-events-%d", n), K1M: o.Deployed.Binary(deployed.K1m), Args: clusterload.RouteEventArgs(n)})
	}
	for i := range out {
		out[i].Servers = o.Cluster.Servers
		if o.Cluster.JoinProfile {
			out[i].Args = append(out[i].Args, clusterload.JoinProfileArgs...)
		}
	}
	return out
}
