package bench

import (
	"context"
	"errors"
	"fmt"
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

// runSchedule measures the scheduler of one fresh `k1m server` of each
// build per round at each node count. Each round's steps are written as
// soon as they are in.
func runSchedule(ctx context.Context, o Options, rep *Report) error {
	rep.Schedule = &schedule.Result{Config: o.Schedule}
	return eachFresh(ctx, o, "schedule", scheduleVariants(o), func(c *scaleout.Cluster, flavour string, round int) error {
		return scheduleRound(ctx, o, c, flavour, round, rep)
	})
}

// scheduleVariants are the two builds, or with --schedule-scores the k1m
// build at each percentage of nodes to score.
func scheduleVariants(o Options) []serverVariant {
	if len(o.Schedule.Scores) == 0 {
		return buildVariants(o)
	}
	var out []serverVariant
	for _, p := range o.Schedule.Scores {
		out = append(out, serverVariant{Name: schedule.ScoreVariant(p), K1M: o.Deployed.Binary(deployed.K1m), Args: schedule.ScoreArgs(p)})
	}
	return out
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
