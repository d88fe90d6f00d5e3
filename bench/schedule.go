package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/deployed"
	"k1m.dev/k1m/bench/proc"
	"k1m.dev/k1m/bench/scaleout"
	"k1m.dev/k1m/bench/schedule"
	"k1m.dev/k1m/pkg/poll"
)

// schedulerProcess is the scheduler's name among the server's processes
// in both builds (a child process `k1m kube-scheduler`).
const schedulerProcess = "k1m kube-scheduler"

// runSchedule brings up one fresh `k1m server` of each build per round,
// alternating the order, and measures its scheduler at each node count.
// Each round's steps are written as soon as they are in.
func runSchedule(ctx context.Context, o Options, rep *Report) error {
	rep.Schedule = &schedule.Result{Config: o.Schedule}
	runsDir := filepath.Join(o.Results, "runs")
	for round := 1; round <= o.Rounds; round++ {
		order := slices.Clone(deployed.Flavours)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, flavour := range order {
			clusterDir := filepath.Join(runsDir, fmt.Sprintf("schedule-%s-%d", flavour, round))
			fmt.Fprintf(o.Progress, "schedule, round %d/%d, %s: bringing up one `k1m server` (logs in %s)\n", round, o.Rounds, flavour, clusterDir)
			shape := scaleout.Shape{Name: "schedule-" + flavour, Servers: 1, K1M: o.Deployed.Binary(flavour)}
			so := scaleout.Options{ImagesDir: o.Deployed.ImagesDir, DataRoot: o.Deployed.DataRoot}
			err := scaleout.WithShape(ctx, shape, so, clusterDir, o.Progress, func(c *scaleout.Cluster) error {
				return scheduleRound(ctx, o, c, flavour, round, rep)
			})
			if err != nil {
				return fmt.Errorf("schedule, %s, round %d: %w", flavour, round, err)
			}
		}
	}
	return nil
}

func scheduleRound(ctx context.Context, o Options, c *scaleout.Cluster, flavour string, round int, rep *Report) error {
	pid, err := findProcess(ctx, c.ServerPID(1), schedulerProcess)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(c.Config(1))
	if err != nil {
		return err
	}
	progress := func(line string) { fmt.Fprintf(o.Progress, "  %s, round %d: %s\n", flavour, round, line) }
	steps, err := schedule.Run(ctx, o.Schedule, client, pid, progress)
	for _, s := range steps {
		s.Flavour, s.Round = flavour, round
		rep.Schedule.Steps = append(rep.Schedule.Steps, s)
	}
	return errors.Join(err, rep.writeData())
}

// findProcess waits up to a minute for the process named name under root
// (the scheduler starts once kube-apiserver is ready).
func findProcess(ctx context.Context, root int, name string) (int, error) {
	var pid int
	err := poll.Until(ctx, time.Second, time.Minute, name+" among the server's processes", func(context.Context) error {
		members, err := proc.Tree(root)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.Name == name {
				pid = m.PID
				return nil
			}
		}
		return fmt.Errorf("no %s yet", name)
	})
	return pid, err
}
