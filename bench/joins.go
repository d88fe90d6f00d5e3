package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/joins"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/pkg/pki"
)

// runJoins joins o.Joins.Joins simulated nodes to one fresh `k1m server`
// of each build per round with its join token. Each trial is written as
// soon as it is in.
func runJoins(ctx context.Context, o Options, rep *Report) error {
	rep.Joins = &joins.Result{Config: o.Joins}
	return eachFreshServer(ctx, o, "joins", func(c *scaleout.Cluster, flavour string, round int) error {
		t, err := joinTrial(ctx, o, c, flavour, round)
		if err != nil {
			return err
		}
		rep.Joins.Trials = append(rep.Joins.Trials, t)
		return rep.writeData()
	})
}

// eachFreshServer brings up one fresh `k1m server` of each build per
// round, alternating the order (a machine holds one local cluster at a
// time; logs under the results' runs/SCENARIO-BUILD-ROUND), and runs fn
// on it; the cluster is taken down whatever fn returned.
func eachFreshServer(ctx context.Context, o Options, scenario string, fn func(c *scaleout.Cluster, flavour string, round int) error) error {
	return eachFresh(ctx, o, scenario, buildVariants(o), fn)
}

// buildVariants are the two builds' servers, at their defaults.
func buildVariants(o Options) []serverVariant {
	var variants []serverVariant
	for _, flavour := range deployed.Flavours {
		variants = append(variants, serverVariant{Name: flavour, K1M: o.Deployed.Binary(flavour)})
	}
	return variants
}

// serverVariant is a fresh server's binary and arguments, by name.
type serverVariant struct {
	Name string
	K1M  string
	Args []string
	// Servers is how many full servers the cluster has; 0 is 1.
	Servers int
}

// eachFresh brings up one fresh `k1m server` of each variant per round,
// as eachFreshServer does for the builds.
func eachFresh(ctx context.Context, o Options, scenario string, variants []serverVariant, fn func(c *scaleout.Cluster, variant string, round int) error) error {
	runsDir := filepath.Join(o.Results, "runs")
	for round := 1; round <= o.Rounds; round++ {
		order := slices.Clone(variants)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, v := range order {
			clusterDir := filepath.Join(runsDir, fmt.Sprintf("%s-%s-%d", scenario, v.Name, round))
			fmt.Fprintf(o.Progress, "%s, round %d/%d, %s: bringing up %s (logs in %s)\n", scenario, round, o.Rounds, v.Name, serversPhrase(v.Servers), clusterDir)
			shape := scaleout.Shape{Name: scenario + "-" + v.Name, Servers: max(1, v.Servers), K1M: v.K1M, ServerArgs: append(append([]string{deployed.FixedCoreDNS}, v.Args...), o.ServerArgs...)}
			so := scaleout.Options{ImagesDir: o.Deployed.ImagesDir, DataRoot: o.Deployed.DataRoot}
			err := scaleout.WithShape(ctx, shape, so, clusterDir, o.Progress, func(c *scaleout.Cluster) error { return fn(c, v.Name, round) })
			if err != nil {
				return fmt.Errorf("%s, %s, round %d: %w", scenario, v.Name, round, err)
			}
		}
	}
	return nil
}

// serversPhrase says how many servers a variant's cluster has.
func serversPhrase(n int) string {
	if n <= 1 {
		return "one `k1m server`"
	}
	return fmt.Sprintf("%d `k1m server`s", n)
}

// joinTrial joins the nodes to server 1 of c with its join token.
func joinTrial(ctx context.Context, o Options, c *scaleout.Cluster, flavour string, round int) (joins.Trial, error) {
	data, err := os.ReadFile(filepath.Join(c.DataDir(1), "token"))
	if err != nil {
		return joins.Trial{}, err
	}
	token, err := pki.ParseToken(strings.TrimSpace(string(data)))
	if err != nil {
		return joins.Trial{}, err
	}
	fmt.Fprintf(o.Progress, "joins, round %d/%d, %s: %d nodes, %d at a time\n", round, o.Rounds, flavour, o.Joins.Joins, o.Joins.Workers)
	progress := func(done, failed int) {
		fmt.Fprintf(o.Progress, "  %d/%d joined, %d failed\n", done, o.Joins.Joins, failed)
	}
	t, err := joins.Run(ctx, o.Joins, joins.Bootstrap(c.Config(1), token.Secret), fmt.Sprintf("sim-%s-%d", flavour, round), progress)
	t.Flavour, t.Round = flavour, round
	fmt.Fprintf(o.Progress, "  %s\n", t.Line())
	return t, err
}
