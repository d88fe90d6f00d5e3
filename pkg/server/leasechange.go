package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/agent/loadbalancer"
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

// rebalanceSpread is what the servers publish for the agents' moves back
// to a server that returned to the list (join.Settings.RebalanceSpread).
// A move makes the node list again what it watches, on that server's new
// watch cache, as a restart does: restartSpread of the node count (the
// nodes preferring that server move at about agentRestartsPerSecond over
// the number of servers), rounded up to a power of two seconds, so that
// k1m-cluster, which every agent watches, changes only when the node
// count doubles. None (0) while the agents' own delay is as long: up to
// 3,000 nodes.
func rebalanceSpread(nodes int) time.Duration {
	d := restartSpread(nodes)
	if d <= loadbalancer.DefaultRebalanceDelay {
		return 0
	}
	s := time.Second
	for s < d {
		s *= 2
	}
	return s
}

// renewalBound is the longest renew interval a node's own annotation is
// believed up to: the slowest interval the cluster could really have
// nodes on, the published one or the slowest in flight when the last
// change was published, and never above what --node-lease-renew-interval
// accepts. A node writes its annotation with its own credentials: without
// a bound, one node writing 87600h would refuse every shorter interval,
// and a server started with one would not start.
func renewalBound(published join.Settings) time.Duration {
	return min(max(published.RenewInterval, published.SlowestInFlight), config.MaxRenewInterval)
}

// ignoredRenewal is a node's renew interval annotation the lease profile
// check does not believe, and why.
type ignoredRenewal struct {
	node  string
	uid   types.UID
	value string // cut at maxShownValue: the node chose its length
	why   string
}

// maxShownValue is how much of an ignored annotation logs and Events show.
const maxShownValue = 64

func (i ignoredRenewal) message() string {
	return fmt.Sprintf("annotation %s %q is ignored by the server's lease profile change check: %s", constants.NodeRenewIntervalAnnotation, i.value, i.why)
}

// slowestRenewal is the longest renew interval a node of the cluster may
// still run with: what each node's agent recorded on its Node
// (constants.NodeRenewIntervalAnnotation) up to bound, and the published
// profile for nodes that recorded none or one not believed. It returns
// the nodes at that interval and, by name, the annotations not believed.
func slowestRenewal(published, bound time.Duration, nodes []corev1.Node) (time.Duration, []string, []ignoredRenewal) {
	slowest, who, ignored := published, []string{}, []ignoredRenewal(nil)
	for _, n := range nodes {
		if !ready(n) {
			continue // NotReady already (powered off, gone): nothing to keep Ready
		}
		d := published
		if v, ok := n.Annotations[constants.NodeRenewIntervalAnnotation]; ok {
			believed, why := believeRenewal(v, bound)
			if why == "" {
				d = believed
			} else {
				ignored = append(ignored, ignoredRenewal{node: n.Name, uid: n.UID, value: shown(v), why: why})
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
	sort.Slice(ignored, func(a, b int) bool { return ignored[a].node < ignored[b].node })
	return slowest, who, ignored
}

// believeRenewal parses a node's annotation; a reason not to believe it
// when it is not a renew interval or is above bound.
func believeRenewal(v string, bound time.Duration) (time.Duration, string) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil || d <= 0:
		return 0, "not a renew interval (want a duration above 0s, as the node agent writes)"
	case d > bound:
		return 0, fmt.Sprintf("above %s, the slowest renew interval this cluster's nodes could run with (the published interval, or the slowest in flight when the last change was published)", bound)
	}
	return d, ""
}

func shown(v string) string {
	if len(v) > maxShownValue {
		return v[:maxShownValue] + "..."
	}
	return v
}

// reportIgnored logs each ignored annotation and raises a Warning Event on
// its Node, for the node's owner to see. Its cost is bounded by the
// caller: phaseLeaseChange lists the nodes only at a start that changes
// the lease profile, so an annotation costs one log line and one Event
// per such start (a refused start, restarted by its supervisor, repeats
// them), never a loop. A failed Event is logged, and the start goes on.
func (s *Server) reportIgnored(ctx context.Context, client kubernetes.Interface, ignored []ignoredRenewal, bound time.Duration) {
	for n, i := range ignored {
		if n == maxIgnoredReported {
			s.step("%d more nodes' renew interval annotations ignored: not logged or raised one by one", len(ignored)-n)
			break
		}
		s.step("lease profile change: ignoring node %s's annotation %s=%q (bound %s): %s", i.node, constants.NodeRenewIntervalAnnotation, i.value, bound, i.why)
		if _, err := client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, renewalIgnoredEvent(i, s.nodeName, time.Now()), metav1.CreateOptions{}); err != nil {
			s.warn("recording node %s's ignored renew interval annotation as an Event: %v", i.node, err)
		}
	}
	if len(ignored) > 0 {
		names := make([]string, len(ignored))
		for n, i := range ignored {
			names[n] = i.node
		}
		s.step("not believing the %s annotation of %s (above %s, or not a duration): see the %s Events on those Nodes",
			constants.NodeRenewIntervalAnnotation, nodeList(names), bound, renewalIgnoredReason)
	}
}

// maxIgnoredReported bounds the log lines and Events of one start: each
// Event is a request made before the server goes on, and a cluster
// upgraded in the middle of a change may have every node above the bound.
const maxIgnoredReported = 20

// renewalIgnoredReason is the reason of the Event reportIgnored raises.
const renewalIgnoredReason = "K1mRenewIntervalIgnored"

// renewalIgnoredEvent is a Warning on the Node, in the namespace and name
// form client-go's event recorder gives a cluster-scoped object's Events.
func renewalIgnoredEvent(i ignoredRenewal, host string, now time.Time) *corev1.Event {
	at := metav1.NewTime(now)
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", i.node, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: i.node, UID: i.uid},
		Reason:              renewalIgnoredReason,
		Message:             i.message(),
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "k1m-server", Host: host},
		FirstTimestamp:      at,
		LastTimestamp:       at,
		Count:               1,
		ReportingController: "k1m-server",
		ReportingInstance:   host,
	}
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

// leaseChange is what phaseLeaseChange settles for the settings published
// with the lease profile.
type leaseChange struct {
	spread          time.Duration // join.Settings.RestartSpread
	slowestInFlight time.Duration // join.Settings.SlowestInFlight
}

// phaseLeaseChange compares the lease profile about to be published with
// what the cluster runs and refuses a change nodes cannot absorb, before
// anything is written. On a change it returns the spread of the agents'
// restarts (restartSpread of the cluster's nodes) and the slowest interval
// then in flight (the bound of the next change's annotations); else what
// is published already. data is k1m-cluster's (nil: a new cluster).
func (s *Server) phaseLeaseChange(ctx context.Context, client kubernetes.Interface, data map[string]string) (leaseChange, error) {
	if data == nil {
		return leaseChange{}, nil // a new cluster
	}
	published, err := join.SettingsFromData(data)
	if err != nil {
		return leaseChange{}, err
	}
	if published.RenewInterval == s.cfg.Lease.RenewInterval {
		return leaseChange{spread: published.RestartSpread, slowestInFlight: published.SlowestInFlight}, nil
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return leaseChange{}, fmt.Errorf("listing nodes for the lease profile change: %w", err)
	}
	bound := renewalBound(published)
	slowest, who, ignored := slowestRenewal(published.RenewInterval, bound, nodes.Items)
	s.reportIgnored(ctx, client, ignored, bound)
	if err := checkLeaseChange(s.cfg.Lease, slowest, who); err != nil {
		return leaseChange{}, err
	}
	spread := restartSpread(len(nodes.Items))
	s.step("lease profile changes from renew %s to %s: agents watch k1m-cluster and follow, each restarting itself at a random point of %s (%d nodes at %d a second; pods keep running)",
		published.RenewInterval, s.cfg.Lease.RenewInterval, spread, len(nodes.Items), agentRestartsPerSecond)
	return leaseChange{spread: spread, slowestInFlight: slowest}, nil
}
