package bench

import (
	"context"
	"fmt"
	"path/filepath"

	"k1m.dev/k1m/bench/scaleout"
)

// runScaleOut floods cluster A (three servers) through API servers {1},
// {1,2}, {1,2,3}, alternating, then the lone server of cluster B, for
// o.Rounds rounds each. The clusters run one after the other: a machine
// holds one local cluster at a time.
func runScaleOut(ctx context.Context, o Options, rep *Report) error {
	res := &scaleout.Result{Cores: rep.Machine.Cores, Lease: o.Lease, ServerMemory: o.ScaleOut.ServerMemory}
	rep.ScaleOut = res
	for _, name := range []string{scaleout.ClusterA, scaleout.ClusterB} {
		if err := scaleOutCluster(ctx, o, name, res); err != nil {
			return err
		}
		// Cluster A's floods are kept even if cluster B fails.
		if err := rep.writeData(); err != nil {
			return err
		}
	}
	return nil
}

func scaleOutCluster(ctx context.Context, o Options, name string, res *scaleout.Result) error {
	vias := scaleout.Vias[:1] // the lone server: its one API server
	if name == scaleout.ClusterA {
		vias = scaleout.Vias
	}
	byKey := map[string][]int{}
	var keys []string
	for _, via := range vias {
		key := scaleout.Flood{Via: via}.ViaText()
		byKey[key], keys = via, append(keys, key)
	}
	clusterDir := filepath.Join(o.Results, "runs", "scaleout-"+name)
	fmt.Fprintf(o.Progress, "scale-out: bringing up cluster %s (logs in %s)\n", name, clusterDir)
	return scaleout.WithCluster(ctx, o.ScaleOut, name, clusterDir, o.Progress, func(c *scaleout.Cluster) error {
		if err := c.MoveLeader(ctx, 1); err != nil {
			// Not fatal: the fit reads the leader of every flood.
			fmt.Fprintf(o.Progress, "scale-out: %v; the leader stays where it is\n", err)
		}
		info, err := c.Idle(ctx, scaleout.IdleSettle, scaleout.IdleWindow)
		if err != nil {
			return err
		}
		res.Clusters = append(res.Clusters, info)
		for round := 0; round < o.Rounds; round++ {
			for _, key := range order(keys, round) {
				fmt.Fprintf(o.Progress, "scale-out, round %d/%d, cluster %s through API servers %s: %d Leases, %d workers, %d watchers, %v warm-up + %v\n",
					round+1, o.Rounds, name, key, o.Lease.Leases, o.Lease.Workers, o.Lease.Watchers, o.Lease.Warmup, o.Lease.Duration)
				f, err := c.Flood(ctx, byKey[key], round+1, o.Lease)
				if err != nil {
					return fmt.Errorf("cluster %s through API servers %s: %w", name, key, err)
				}
				fmt.Fprintf(o.Progress, "  %s\n", f.Line())
				res.Floods = append(res.Floods, f)
			}
		}
		return nil
	})
}
