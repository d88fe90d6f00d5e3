package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/agent/loadbalancer"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/test/clustercheck"
)

// Scenario is one fault and its heal.
type Scenario struct {
	Name string
	What string // one line for the table and the docs
	// CI: part of the subset make test runs.
	CI bool
	// FromEarlierRelease: the scenario needs the cluster started from an
	// earlier release (Options.FromK1M); it runs first, and only when
	// named (not in all or ci).
	FromEarlierRelease bool
	// Run injects the fault and heals it; it returns once healed.
	Run func(ctx context.Context, f *Fixture) error
}

// Hold times: how long a fault lasts. A partition is held past the
// controller-manager's node grace period (50 s), so that a node that
// cannot renew its Lease through any server would be seen NotReady.
const (
	downHold      = 20 * time.Second
	partitionHold = 60 * time.Second
	diskHold      = 30 * time.Second
	// diskLeft is what the disk-full scenario leaves free: under the
	// 512 MiB the server keeps in reserve under its durable etcd
	// (docs/operations.md#disk), over what etcd needs not to crash.
	diskLeft = 256 << 20
)

// nodeReadyTimeout bounds the wait for a restarted node to be Ready
// through every server.
const nodeReadyTimeout = 2 * time.Minute

// diskServer is the server whose durable etcd lives on a tmpfs of its
// own (Options.EtcdDisk) for the disk-full scenario.
const diskServer = 3

// Scenarios are the campaign's scenarios, in the order they run.
var Scenarios = []Scenario{
	{Name: "kill-9", CI: true, What: "SIGKILL the server whose controller-manager leads, start it 20 s later", Run: kill9},
	{Name: "sigterm", What: "SIGTERM server 1 (the agents' --server), start it 20 s later", Run: sigterm},
	{Name: "stop-while-reboot", CI: true, What: "stop server 2; while it is down, stop and start server 3; then start server 2", Run: stopWhileReboot},
	{Name: "rolling", What: "restart servers 1, 2, 3 one by one (SIGTERM, start, its node Ready)", Run: rolling},
	{Name: "all-stop", What: "SIGTERM every server at once, start them in the order 3, 1, 2", Run: allStop},
	{Name: "partition-server", CI: true, What: "cut the server whose controller-manager leads off from the other servers (ip6tables) for 60 s; agents still reach it", Run: partitionServer},
	{Name: "partition-agent", What: "cut agent 1 off from its preferred server (ip6tables) for 60 s", Run: partitionAgent},
	{Name: "disk-full", What: "fill server 3's etcd file system to 256 MiB free for 30 s, then free it", Run: diskFull},
	{Name: "upgrade", FromEarlierRelease: true, What: "rolling upgrade from the earlier release through the release in between (the replicated database started there) to this tree: servers 1, 2, 3, then the agents, each stopped and started on the next binary", Run: upgrade},
}

// Select picks scenarios by name from a comma-separated list, in which
// "all" is every scenario but the upgrade and "ci" the CI subset (""
// is all); a scenario named twice runs once.
func Select(names string) ([]Scenario, error) {
	if names == "" {
		names = "all"
	}
	var out []Scenario
	var unknown []string
	pick := func(s Scenario) {
		if !slices.ContainsFunc(out, func(o Scenario) bool { return o.Name == s.Name }) {
			out = append(out, s)
		}
	}
	for _, name := range strings.Split(names, ",") {
		name = strings.TrimSpace(name)
		if name == "all" || name == "ci" {
			for _, s := range Scenarios {
				if !s.FromEarlierRelease && (s.CI || name == "all") {
					pick(s)
				}
			}
			continue
		}
		i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
		if i < 0 {
			unknown = append(unknown, name)
			continue
		}
		pick(Scenarios[i])
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("SCENARIOS=%s: no scenario %s; want a comma-separated list of %s, or all, or ci", names, strings.Join(unknown, ", "), strings.Join(scenarioNames(), ", "))
	}
	// The cluster starts on the earlier release only once, before any
	// other scenario.
	slices.SortStableFunc(out, func(a, b Scenario) int {
		return boolOrder(b.FromEarlierRelease) - boolOrder(a.FromEarlierRelease)
	})
	return out, nil
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FromEarlierRelease tells whether any of scenarios needs the cluster
// started from an earlier release.
func FromEarlierRelease(scenarios []Scenario) bool {
	return slices.ContainsFunc(scenarios, func(s Scenario) bool { return s.FromEarlierRelease })
}

// RequireMovable refuses partitions the upgrade scenario cannot move into
// (it starts from a release without partitions and migrates).
func RequireMovable(scenarios []Scenario, partitions []string) error {
	if !FromEarlierRelease(scenarios) {
		return nil
	}
	for _, name := range partitions {
		if p, ok := constants.StorePartitionNamed(name); ok && !p.Movable {
			return fmt.Errorf("PARTITIONS=%s with the upgrade scenario, which migrates into them: %s can only be set when a cluster is made; give some of %s",
				strings.Join(partitions, ","), name, strings.Join(constants.MovableStorePartitionNames(), ", "))
		}
	}
	return nil
}

func scenarioNames() []string {
	var out []string
	for _, s := range Scenarios {
		out = append(out, s.Name)
	}
	return out
}

// NeedsEtcdDisk tells whether any of scenarios is the disk-full one (which needs
// Options.EtcdDisk).
func NeedsEtcdDisk(scenarios []Scenario) bool {
	return slices.ContainsFunc(scenarios, func(s Scenario) bool { return s.Name == "disk-full" })
}

// DiskServer is the server Options.EtcdDisk names for the disk-full
// scenario.
func DiskServer() int { return diskServer }

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// leaderServer is the server whose controller-manager leads now
// (clustercheck.ControllerManagerLeader), or server 2 when none is found
// within leaderWait.
func (f *Fixture) leaderServer(ctx context.Context) int {
	var err error
	for deadline := time.Now().Add(leaderWait); time.Now().Before(deadline); time.Sleep(time.Second) {
		var leader int
		var holder string
		if leader, holder, err = clustercheck.ControllerManagerLeader(ctx, f.Client(1), f.H.ServerNames()); err == nil {
			f.logf("the controller-manager's leader is server %d (%s)", leader, holder)
			return leader
		}
	}
	f.logf("the controller-manager's leader not found within %s (%v): server 2", leaderWait, err)
	return 2
}

// leaderWait bounds the search for the controller-manager's leader: a
// Lease lost to a fault is taken again within its 15 s duration.
const leaderWait = 30 * time.Second

func kill9(ctx context.Context, f *Fixture) error {
	victim := f.leaderServer(ctx)
	if err := f.Kill(victim); err != nil {
		return err
	}
	if err := sleep(ctx, downHold); err != nil {
		return err
	}
	return f.Start(ctx, victim)
}

func sigterm(ctx context.Context, f *Fixture) error {
	if err := f.Stop(ctx, 1); err != nil {
		return err
	}
	if err := sleep(ctx, downHold); err != nil {
		return err
	}
	return f.Start(ctx, 1)
}

func stopWhileReboot(ctx context.Context, f *Fixture) error {
	if err := f.Stop(ctx, 2); err != nil {
		return err
	}
	if err := f.Stop(ctx, 3); err != nil {
		return err
	}
	// Server 3 comes back next to server 1 alone: its etcds must rejoin
	// server 1's, not start a group of their own.
	errs := []error{f.Start(ctx, 3)}
	return errors.Join(append(errs, f.Start(ctx, 2))...)
}

func rolling(ctx context.Context, f *Fixture) error {
	for i := 1; i <= Servers; i++ {
		if err := f.Stop(ctx, i); err != nil {
			return err
		}
		if err := f.Start(ctx, i); err != nil {
			return err
		}
		if err := f.waitNodeReady(ctx, f.ServerNode(i), nodeReadyTimeout); err != nil {
			return err
		}
	}
	return nil
}

func allStop(ctx context.Context, f *Fixture) error {
	if err := f.StopAll(ctx); err != nil {
		return err
	}
	return f.StartInOrder(ctx, 3, 1, 2)
}

func partitionServer(ctx context.Context, f *Fixture) error {
	victim := f.leaderServer(ctx)
	if err := f.CutServer(victim); err != nil {
		return err
	}
	held := sleep(ctx, partitionHold)
	return errors.Join(held, f.HealServer(victim))
}

func partitionAgent(ctx context.Context, f *Fixture) error {
	s := f.preferredServer(1)
	if err := f.CutAgent(1, s); err != nil {
		return err
	}
	held := sleep(ctx, partitionHold)
	return errors.Join(held, f.HealAgent(1, s))
}

// preferredServer is the server agent a's load balancer prefers: the
// first of its rendezvous order over every server's address.
func (f *Fixture) preferredServer(a int) int {
	var addrs []string
	for i := 1; i <= Servers; i++ {
		addrs = append(addrs, fmt.Sprintf("[%s]:6443", f.H.Server(i).Addr))
	}
	first := loadbalancer.Order(f.H.Agent(a).Name, addrs)[0]
	return slices.Index(addrs, first) + 1
}

func diskFull(ctx context.Context, f *Fixture) error {
	if f.opts.EtcdDisk != diskServer {
		return fmt.Errorf("server %d's etcd has no file system of its own (the campaign mounts one when disk-full is selected)", diskServer)
	}
	if err := f.FillDisk(diskServer, diskLeft); err != nil {
		return err
	}
	held := sleep(ctx, diskHold)
	return errors.Join(held, f.FreeDisk(diskServer))
}

// waitNodeReady waits for node to be Ready through every server.
func (f *Fixture) waitNodeReady(ctx context.Context, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f.nodeReadyEverywhere(ctx, node)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready within %s: %w", node, timeout, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

func (f *Fixture) nodeReadyEverywhere(ctx context.Context, node string) error {
	for i := 1; i <= Servers; i++ {
		n, err := f.Client(i).CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !clustercheck.Ready(n) {
			return fmt.Errorf("NotReady through server %d", i)
		}
	}
	return nil
}
