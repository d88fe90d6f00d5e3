// Package kwoknodes ramps the number of simulated nodes (kwok) in a
// control plane until the mutating-call p99 breaks the upstream SLO (1 s)
// or nodes go NotReady, and reports the largest count held and what each
// node costs in kube-apiserver and etcd memory.
package kwoknodes

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/bench/apimetrics"
	"k1m.dev/k1m/pkg/bench/controlplane"
	"k1m.dev/k1m/pkg/bench/proc"
	"k1m.dev/k1m/pkg/bench/stats"
)

// MinDelivered is the share of the nominal Lease write rate (nodes / renew
// interval) a step must see to count as held.
const MinDelivered = 0.9

func expectedRate(nodes int, renew time.Duration) float64 {
	return float64(nodes) / renew.Seconds()
}

// Annotation kwok manages nodes by.
const Annotation = "kwok.x-k8s.io/node"

// Config of one ramp.
type Config struct {
	Steps          []int         // node counts, ascending
	Hold           time.Duration // measured window at each step
	ReadyTimeout   time.Duration // for all nodes of a step to be Ready
	SLO            time.Duration // mutating-call p99 limit (upstream: 1 s)
	Creators       int           // concurrent Node creators
	Kwok           string        // kwok binary
	Stages         string        // kwok --config file with the node stages
	RenewInterval  time.Duration // node Lease renew interval simulated (lease = 4x)
	Progress       io.Writer
	ProgressPrefix string
}

// Step is the outcome of one node count.
type Step struct {
	Nodes          int
	Held           bool
	Reason         string  // why not held
	MutatingP99    float64 // seconds, over the hold window
	LeaseWriteRate float64 // Lease PUTs/s over the window
	NotReady       int
	APIServerRSS   int64
	EtcdRSS        int64
	APIServerCores float64 // CPU over the window / wall time
}

// Result of a ramp.
type Result struct {
	Steps              []Step
	MaxHeld            int
	APIServerBytesNode float64 // RSS growth per node, baseline to the largest step held
	EtcdBytesNode      float64
}

// Run starts kwok against cp and ramps.
func Run(ctx context.Context, cp *controlplane.ControlPlane, dir string, cfg Config) (Result, error) {
	leaseSeconds := int(4 * cfg.RenewInterval / time.Second)
	kwok, err := proc.Start(ctx, "kwok", cfg.Kwok, []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--manage-nodes-with-annotation-selector=" + Annotation + "=fake",
		"--node-lease-duration-seconds=" + strconv.Itoa(leaseSeconds),
		"--config=" + cfg.Stages,
		"--server-address=",
	}, nil, filepath.Join(dir, "kwok.log"))
	if err != nil {
		return Result{}, err
	}
	defer kwok.Stop()
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return Result{}, err
	}
	baseAPI, baseEtcd, err := rss(cp)
	if err != nil {
		return Result{}, err
	}
	var res Result
	created := 0
	for _, n := range cfg.Steps {
		fmt.Fprintf(cfg.Progress, "%s%d nodes: creating\n", cfg.ProgressPrefix, n)
		step := Step{Nodes: n}
		if err := createNodes(ctx, client, created, n, cfg.Creators); err != nil {
			return res, err
		}
		created = n
		if err := waitReady(ctx, client, n, cfg.ReadyTimeout, kwok); err != nil {
			step.Reason = err.Error()
			res.Steps = append(res.Steps, step)
			break
		}
		if err := hold(ctx, cp, client, cfg, &step); err != nil {
			return res, err
		}
		fmt.Fprintf(cfg.Progress, "%s%d nodes: mutating p99 %s, %.0f Lease writes/s, %d NotReady, apiserver %d MiB, etcd %d MiB: %s\n",
			cfg.ProgressPrefix, n, apimetrics.FormatSeconds(step.MutatingP99), step.LeaseWriteRate, step.NotReady,
			step.APIServerRSS>>20, step.EtcdRSS>>20, map[bool]string{true: "held", false: "not held (" + step.Reason + ")"}[step.Held])
		res.Steps = append(res.Steps, step)
		if !step.Held {
			break
		}
		res.MaxHeld = n
		res.APIServerBytesNode = float64(step.APIServerRSS-baseAPI) / float64(n)
		res.EtcdBytesNode = float64(step.EtcdRSS-baseEtcd) / float64(n)
	}
	return res, nil
}

func hold(ctx context.Context, cp *controlplane.ControlPlane, client kubernetes.Interface, cfg Config, step *Step) error {
	before, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return err
	}
	cpuBefore, err := cp.APIServer.Usage()
	if err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.Hold):
	}
	after, err := apimetrics.Scrape(ctx, client)
	if err != nil {
		return err
	}
	cpuAfter, err := cp.APIServer.Usage()
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	step.MutatingP99 = stats.HistogramQuantile(0.99, stats.SubBuckets(after.MutatingLatency(""), before.MutatingLatency("")))
	step.LeaseWriteRate = (after.Requests("PUT", "leases") - before.Requests("PUT", "leases")) / elapsed.Seconds()
	step.APIServerCores = (cpuAfter.CPU - cpuBefore.CPU).Seconds() / elapsed.Seconds()
	ready, total, err := countReady(ctx, client)
	if err != nil {
		return err
	}
	step.NotReady = total - ready
	if step.APIServerRSS, step.EtcdRSS, err = rss(cp); err != nil {
		return err
	}
	judge(step, cfg.SLO, cfg.RenewInterval)
	return nil
}

// judge decides whether a measured step held: the SLO met, every node
// Ready, and the renewal load actually delivered.
func judge(step *Step, slo, renew time.Duration) {
	step.Held, step.Reason = false, ""
	switch {
	case math.IsNaN(step.MutatingP99):
		step.Reason = "no mutating calls measured"
	case step.MutatingP99 > slo.Seconds():
		step.Reason = fmt.Sprintf("mutating p99 %s > %v", apimetrics.FormatSeconds(step.MutatingP99), slo)
	case step.NotReady > 0:
		step.Reason = fmt.Sprintf("%d nodes NotReady", step.NotReady)
	case step.LeaseWriteRate < MinDelivered*expectedRate(step.Nodes, renew):
		// kwok shares the machine; when it cannot renew every Lease on
		// time the control plane is not under the load the step claims.
		step.Reason = fmt.Sprintf("renewals not delivered: %.0f of %.0f Lease writes/s (simulator or server saturated)",
			step.LeaseWriteRate, expectedRate(step.Nodes, renew))
	default:
		step.Held = true
	}
}

func rss(cp *controlplane.ControlPlane) (api, etcd int64, err error) {
	u, err := cp.APIServer.Usage()
	if err != nil {
		return 0, 0, err
	}
	for _, p := range cp.EtcdMembers() {
		e, err := p.Usage()
		if err != nil {
			return 0, 0, err
		}
		etcd += e.RSS
	}
	return u.RSS, etcd, nil
}

// NewNode is a node kwok will take over: a big machine, tainted like
// kwok's examples so nothing is scheduled on it by accident.
func NewNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{Annotation: "fake"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/role": "agent"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

func createNodes(ctx context.Context, client kubernetes.Interface, from, to, workers int) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < to; i = int(next.Add(1) - 1) {
				_, err := client.CoreV1().Nodes().Create(ctx, NewNode(fmt.Sprintf("kwok-node-%07d", i)), metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- fmt.Errorf("creating node %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func waitReady(ctx context.Context, client kubernetes.Interface, want int, timeout time.Duration, kwok *proc.Process) error {
	deadline := time.Now().Add(timeout)
	for {
		ready, _, err := countReady(ctx, client)
		if err == nil && ready >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes Ready after %v", ready, want, timeout)
		}
		select {
		case <-kwok.Done():
			return fmt.Errorf("kwok exited: %v (see kwok.log)", kwok.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}

// countReady lists the nodes (from the watch cache) and counts the Ready ones.
func countReady(ctx context.Context, client kubernetes.Interface) (ready, total int, err error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for _, n := range nodes.Items {
		if isReady(&n) {
			ready++
		}
	}
	return ready, len(nodes.Items), nil
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
