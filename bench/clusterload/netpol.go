package clusterload

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/netpol"
	"k1m.dev/k1m/pkg/poll"
)

// The NetworkPolicy probe runs after a step's load: a policy isolates the
// pods of the step's first Deployment, allowing ingress from the pods
// labelled as clients. Then pods of the second Deployment become clients
// one at a time (each a change of the policy's peers), and pods of the
// third get a label no policy reads. Each node's k1m agent watches its
// own rules by name (rulesWatch), so a change should reach the nodes
// whose rules name the changed pod and no other, at any cluster size.
const (
	ProbeChanges   = 5
	probePolicy    = "k1m-bench-isolate"
	clientLabel    = "k1m.dev/bench-client"
	untouchedLabel = "k1m.dev/bench-unread"
	// probeTimeout bounds each wait for the rules to follow a change
	// (the publisher compiles at most once a second).
	probeTimeout = 2 * time.Minute
)

// NetpolProbe is what the probe saw.
type NetpolProbe struct {
	Watches   int // the nodes' watches of their rules (one a node)
	Selected  int // pods the policy isolates
	RuleNodes int // nodes whose rules name them
	// PeerEvents are the rules watches' events over ProbeChanges peer
	// changes; UnreadEvents over ProbeChanges changes no policy reads and
	// one peer change after them, which shows they were compiled.
	PeerEvents   int64
	UnreadEvents int64
	Error        string `json:",omitempty"`
}

// EventsPerPeerChange is the rules events one peer change caused.
func (p NetpolProbe) EventsPerPeerChange() float64 {
	return float64(p.PeerEvents) / ProbeChanges
}

// probeNetpol runs the probe in namespace ns, whose deployments
// Deployments of replicas pods all run on the step's nodes, each of
// which watches its rules.
func probeNetpol(ctx context.Context, client kubernetes.Interface, ns string, nodes *fleet, watches, deployments, replicas int) *NetpolProbe {
	p := &NetpolProbe{Watches: watches}
	if deployments < 3 || replicas < ProbeChanges+1 {
		p.Error = fmt.Sprintf("not run: it needs 3 Deployments of at least %d pods, the step has %d of %d", ProbeChanges+1, deployments, replicas)
		return p
	}
	if err := p.run(ctx, client, ns, nodes); err != nil {
		p.Error = err.Error()
	}
	return p
}

func (p *NetpolProbe) run(ctx context.Context, client kubernetes.Interface, ns string, nodes *fleet) error {
	pods := func(app string) ([]corev1.Pod, error) {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appLabel + "=" + app})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of %s/%s: %w", ns, app, err)
		}
		return list.Items, nil
	}
	selected, err := pods(DeploymentName(0))
	if err != nil {
		return err
	}
	clients, err := pods(DeploymentName(1))
	if err != nil {
		return err
	}
	unread, err := pods(DeploymentName(2))
	if err != nil {
		return err
	}
	if len(clients) < ProbeChanges+1 || len(unread) < ProbeChanges {
		return fmt.Errorf("found %d pods of %s and %d of %s, want at least %d and %d", len(clients), DeploymentName(1), len(unread), DeploymentName(2), ProbeChanges+1, ProbeChanges)
	}
	p.Selected = len(selected)
	if _, err := client.NetworkingV1().NetworkPolicies(ns).Create(ctx, IsolatingPolicy(ns, DeploymentName(0)), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating NetworkPolicy %s/%s: %w", ns, probePolicy, err)
	}
	var peers []netip.Prefix
	if err := waitRules(ctx, client, selected, peers, probeTimeout); err != nil {
		return err
	}
	p.RuleNodes = len(nodesOf(selected))
	label := func(pod corev1.Pod, key string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"yes"}}}`, key)
		_, err := client.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	peerChange := func(pod corev1.Pod) error {
		if err := label(pod, clientLabel); err != nil {
			return fmt.Errorf("labelling %s a client: %w", pod.Name, err)
		}
		peers = append(peers, hostPrefixes(pod)...)
		return waitRules(ctx, client, selected, peers, probeTimeout)
	}
	start := nodes.rules.events.Load()
	for _, pod := range clients[:ProbeChanges] {
		if err := peerChange(pod); err != nil {
			return err
		}
	}
	p.PeerEvents = nodes.rules.events.Load() - start
	start = nodes.rules.events.Load()
	for _, pod := range unread[:ProbeChanges] {
		if err := label(pod, untouchedLabel); err != nil {
			return fmt.Errorf("labelling %s: %w", pod.Name, err)
		}
	}
	if err := peerChange(clients[ProbeChanges]); err != nil {
		return err
	}
	p.UnreadEvents = nodes.rules.events.Load() - start
	return nil
}

// DeploymentName is the name of a step's Deployment k (and its Service).
func DeploymentName(k int) string { return fmt.Sprintf("app-%04d", k) }

// IsolatingPolicy isolates app's pods for ingress, allowing the pods
// labelled as clients on port 8080.
func IsolatingPolicy(ns, app string) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(8080)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: probePolicy, Namespace: ns, Labels: map[string]string{benchLabel: benchValue}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{appLabel: app}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{clientLabel: "yes"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		},
	}
}

func hostPrefixes(pod corev1.Pod) []netip.Prefix {
	var out []netip.Prefix
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

func nodesOf(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if !slices.Contains(out, p.Spec.NodeName) {
			out = append(out, p.Spec.NodeName)
		}
	}
	return out
}

// waitRules waits until the rules of every node running a selected pod
// isolate it with exactly peers as its ingress peers.
func waitRules(ctx context.Context, client kubernetes.Interface, selected []corev1.Pod, peers []netip.Prefix, timeout time.Duration) error {
	want := slices.Clone(peers)
	slices.SortFunc(want, comparePrefixes)
	what := fmt.Sprintf("the rules of the nodes of %d isolated pods naming %d peers", len(selected), len(want))
	return poll.Until(ctx, 250*time.Millisecond, timeout, what, func(ctx context.Context) error {
		for _, node := range nodesOf(selected) {
			rules, err := nodeRules(ctx, client, node)
			if err != nil {
				return err
			}
			for _, pod := range selected {
				if pod.Spec.NodeName != node {
					continue
				}
				if err := isolatedWith(rules, pod, want); err != nil {
					return fmt.Errorf("node %s: %w", node, err)
				}
			}
		}
		return nil
	})
}

func nodeRules(ctx context.Context, client kubernetes.Interface, node string) ([]netpol.PodRules, error) {
	cm, err := client.CoreV1().ConfigMaps(netpol.Namespace).Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errors.New("no rules published yet")
	}
	if err != nil {
		return nil, err
	}
	return netpol.Decode([]byte(cm.Data[netpol.RulesKey]))
}

// isolatedWith checks that rules isolate pod for ingress with one rule
// whose peers are want.
func isolatedWith(rules []netpol.PodRules, pod corev1.Pod, want []netip.Prefix) error {
	for _, r := range rules {
		if r.Namespace != pod.Namespace || r.Name != pod.Name {
			continue
		}
		if !r.IngressIsolated || len(r.Ingress) != 1 {
			return fmt.Errorf("pod %s: isolated %v with %d ingress rules, want isolated with 1", pod.Name, r.IngressIsolated, len(r.Ingress))
		}
		got := slices.Clone(r.Ingress[0].Peers)
		slices.SortFunc(got, comparePrefixes)
		if !slices.Equal(got, want) {
			return fmt.Errorf("pod %s: peers %v, want %v", pod.Name, got, want)
		}
		return nil
	}
	return fmt.Errorf("pod %s: not in its node's rules", pod.Name)
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
