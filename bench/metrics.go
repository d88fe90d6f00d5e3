package bench

import (
	"context"
	"errors"
	"fmt"

	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/metricsload"
	"k1m.dev/k1m/bench/scaleout"
)

// runMetrics measures metrics-server on one fresh k1m server per round
// with simulated nodes. metrics-server is the same upstream image in both
// builds: the figure is for sizing, not a comparison.
func runMetrics(ctx context.Context, o Options, rep *Report) error {
	rep.Metrics = &metricsload.Result{Config: o.Metrics}
	variants := []serverVariant{{Name: deployed.K1m, K1M: o.Deployed.Binary(deployed.K1m)}}
	return eachFresh(ctx, o, "metrics", variants, func(c *scaleout.Cluster, flavour string, round int) error {
		env := metricsload.Env{Config: c.Config(1), DataDir: c.DataDir(1), HostAddr: c.HostAddr(),
			Progress: func(line string) { fmt.Fprintf(o.Progress, "  round %d: %s\n", round, line) }}
		steps, err := metricsload.Run(ctx, o.Metrics, env)
		for _, s := range steps {
			s.Flavour, s.Round = flavour, round
			rep.Metrics.Steps = append(rep.Metrics.Steps, s)
		}
		return errors.Join(err, rep.writeData())
	})
}
