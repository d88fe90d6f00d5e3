package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/join"
)

// agentRestartAllowance is how long a node may go without renewing its
// Lease while its agent follows a new lease profile, on top of its old
// renew interval: the agent keeps renewing until it stops, then restarts
// (containerd, the images, the kubelet, its first renewal). Measured at a
// few seconds in make integration; the allowance leaves a wide margin.
const agentRestartAllowance = 15 * time.Second

// agentRestartsPerSecond is how many agents, cluster-wide, a lease
// profile change restarts per second (restartSpread). A restart re-lists
// what the node's kubelet and kube-proxy watch (its pods and Node, every
// Service and EndpointSlice) and re-opens their watches: close to what a
// join costs the control plane but the CSR; the rate keeps that
// load under the join rate bench/joins measures (docs/performance.md).
const agentRestartsPerSecond = 100

// restartSpread is how long n agents' restarts are spread over at
// agentRestartsPerSecond: 3 nodes in 30 ms, 10,000 in 100 s, 100,000 in
// 1,000 s. Any delay is safe: checkLeaseChange accepts only a profile
// whose grace period a node on the old interval keeps within.
func restartSpread(nodes int) time.Duration {
	return time.Duration(nodes) * time.Second / agentRestartsPerSecond
}

// slowestRenewal is the longest renew interval a node of the cluster may
// still run with: what each node's agent recorded on its Node
// (constants.NodeRenewIntervalAnnotation), and the published profile for
// nodes that recorded none. It returns the nodes at that interval.
func slowestRenewal(published time.Duration, nodes []corev1.Node) (time.Duration, []string) {
	slowest, who := published, []string{}
	for _, n := range nodes {
		if !ready(n) {
			continue // NotReady already (powered off, gone): nothing to keep Ready
		}
		d := published
		if v, ok := n.Annotations[constants.NodeRenewIntervalAnnotation]; ok {
			if parsed, err := time.ParseDuration(v); err == nil {
				d = parsed
			}
		}
		switch {
		case d > slowest:
			slowest, who = d, []string{n.Name}
		case d == slowest:
			who = append(who, n.Name)
		}
	}
	sort.Strings(who)
	return slowest, who
}

func ready(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkLeaseChange refuses a new lease profile whose grace period a node
// still on the slowest interval could outlast while its agent follows:
// such a node would be marked NotReady. An interval no shorter than the
// slowest is always absorbed; so is the first start.
func checkLeaseChange(next config.LeaseProfile, slowest time.Duration, who []string) error {
	need := slowest + agentRestartAllowance
	if next.RenewInterval >= slowest || next.GracePeriod >= need {
		return nil
	}
	floor := (need + 5*time.Second - 1) / (5 * time.Second) * time.Second
	return fmt.Errorf("--node-lease-renew-interval %s: its grace period %s is too short for a running cluster whose slowest nodes renew every %s (%s): until each agent has followed k1m-cluster, a node may go %s plus its agent's restart (%s allowed) without renewing, and would be marked NotReady; change it in steps: down to %s now, then further once every node's %s annotation shows it",
		next.RenewInterval, next.GracePeriod, slowest, nodeList(who), slowest, agentRestartAllowance, floor, constants.NodeRenewIntervalAnnotation)
}

func nodeList(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// phaseLeaseChange compares the lease profile about to be published with
// what the cluster runs and refuses a change nodes cannot absorb, before
// anything is written. On a change it returns the spread of the agents'
// restarts (restartSpread of the cluster's nodes); else the spread
// published already. data is k1m-cluster's (nil: a new cluster).
func (s *Server) phaseLeaseChange(ctx context.Context, client kubernetes.Interface, data map[string]string) (time.Duration, error) {
	if data == nil {
		return 0, nil // a new cluster
	}
	published, err := join.SettingsFromData(data)
	if err != nil {
		return 0, err
	}
	if published.RenewInterval == s.cfg.Lease.RenewInterval {
		return published.RestartSpread, nil
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("listing nodes for the lease profile change: %w", err)
	}
	slowest, who := slowestRenewal(published.RenewInterval, nodes.Items)
	if err := checkLeaseChange(s.cfg.Lease, slowest, who); err != nil {
		return 0, err
	}
	spread := restartSpread(len(nodes.Items))
	s.step("lease profile changes from renew %s to %s: agents watch k1m-cluster and follow, each restarting itself at a random point of %s (%d nodes at %d a second; pods keep running)",
		published.RenewInterval, s.cfg.Lease.RenewInterval, spread, len(nodes.Items), agentRestartsPerSecond)
	return spread, nil
}
