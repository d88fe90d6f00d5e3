package bench

import (
	"context"
	"errors"
	"fmt"

	"k1m.dev/k1m/bench/clusterload"
	"k1m.dev/k1m/bench/scaleout"
)

// runCluster loads one fresh `k1m server` of each build per round with
// simulated nodes and Deployments at each node count. Each round's steps
// are written as soon as they are in.
func runCluster(ctx context.Context, o Options, rep *Report) error {
	rep.Cluster = &clusterload.Result{Config: o.Cluster}
	return eachFreshServer(ctx, o, "cluster", func(c *scaleout.Cluster, flavour string, round int) error {
		progress := func(line string) { fmt.Fprintf(o.Progress, "  %s, round %d: %s\n", flavour, round, line) }
		steps, err := clusterload.Run(ctx, o.Cluster, clusterload.Env{Config: c.Config(1), ServerPID: c.ServerPID(1), Progress: progress})
		for _, s := range steps {
			s.Flavour, s.Round = flavour, round
			rep.Cluster.Steps = append(rep.Cluster.Steps, s)
		}
		return errors.Join(err, rep.writeData())
	})
}
