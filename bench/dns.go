package bench

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/dnsload"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/pkg/config"
)

// runDNS measures one CoreDNS replica on one fresh k1m server per round.
// CoreDNS is the same upstream image in both builds: the figure is for
// sizing, not a comparison.
func runDNS(ctx context.Context, o Options, rep *Report) error {
	rep.DNS = &dnsload.Result{Config: o.DNS}
	// eachFresh keeps the scaler away (deployed.FixedCoreDNS), which would
	// bring CoreDNS back from the one replica measured.
	variants := []serverVariant{{Name: deployed.K1m, K1M: o.Deployed.Binary(deployed.K1m)}}
	return eachFresh(ctx, o, "dns", variants, func(c *scaleout.Cluster, _ string, round int) error {
		client, err := kubernetes.NewForConfig(c.Config(1))
		if err != nil {
			return err
		}
		env := dnsload.Env{Client: client, ClusterDomain: config.DefaultServer().ClusterDomain,
			Progress: func(line string) { fmt.Fprintf(o.Progress, "  round %d: %s\n", round, line) }}
		steps, err := dnsload.Run(ctx, o.DNS, env)
		for _, s := range steps {
			s.Round = round
			rep.DNS.Steps = append(rep.DNS.Steps, s)
		}
		return errors.Join(err, rep.writeData())
	})
}
