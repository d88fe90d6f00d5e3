package bench

import (
	"context"
	"path/filepath"

	"k1m.dev/k1m/bench/deployed"
)

// runDeployed floods one fresh `k1m server` of each build per round,
// alternating; a machine holds one local cluster at a time. Each flood's
// data is written as soon as it is in.
func runDeployed(ctx context.Context, o Options, rep *Report) error {
	rep.Deployed = &deployed.Result{Lease: o.Lease, Nodes: o.Deployed.Nodes}
	rep.Deployed.Lease.Watchers = 0 // the deployed components watch
	return deployed.Run(ctx, o.Deployed, o.Rounds, o.Lease, filepath.Join(o.Results, "runs"), o.Progress, func(f deployed.Flood) error {
		rep.Deployed.Floods = append(rep.Deployed.Floods, f)
		return rep.writeData()
	})
}
