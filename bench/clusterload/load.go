package clusterload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/stats"
	"k1m.dev/k1m/pkg/poll"
)

// Labels of what the scenario creates.
const (
	benchLabel = "k1m.dev/bench"
	benchValue = "cluster"
	appLabel   = "app"
	// simulatedNodes selects the simulated nodes (leaseflood.NewNode's
	// label), so that no pod lands on the server's own node.
	simulatedNodeLabel = "k1m.dev/bench"
	simulatedNodeValue = "node-status"
)

// StepNamespace holds step k's Deployments and Services.
func StepNamespace(k int) string { return fmt.Sprintf("k1m-bench-cluster-%d", k) }

// NewService is the Service in front of Deployment name's pods.
func NewService(namespace, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{benchLabel: benchValue}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{appLabel: name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// NewDeployment is a Deployment of replicas pods on simulated nodes.
func NewDeployment(namespace, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{appLabel: name, benchLabel: benchValue}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{benchLabel: benchValue}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{appLabel: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{simulatedNodeLabel: simulatedNodeValue},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
				},
			},
		},
	}
}

// createAtPace creates deployments Services and Deployments of replicas
// pods in namespace, one pair every replicas/pace seconds, each pair from
// its own goroutine so that a slow create does not slow the pace.
func createAtPace(ctx context.Context, client kubernetes.Interface, namespace string, deployments, replicas int, pace float64) error {
	every := time.Duration(float64(replicas) / pace * float64(time.Second))
	tick := time.NewTicker(every)
	defer tick.Stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for k := 0; k < deployments; k++ {
		if k > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			_, err := client.CoreV1().Services(namespace).Create(ctx, NewService(namespace, name), metav1.CreateOptions{})
			if err == nil {
				_, err = client.AppsV1().Deployments(namespace).Create(ctx, NewDeployment(namespace, name, int32(replicas)), metav1.CreateOptions{})
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("creating %s/%s: %w", namespace, name, err))
				mu.Unlock()
			}
		}(DeploymentName(k))
	}
	wg.Wait()
	return errors.Join(errs...)
}

// podTimes is when the measuring watch saw a pod first, bound, and
// running and ready, as ClusterLoader2's pod startup measurement watches
// them.
type podTimes struct {
	namespace             string
	added, bound, running time.Time
}

// tracker is the measuring watch's record of the scenario's pods.
type tracker struct {
	mu   sync.Mutex
	pods map[string]*podTimes // by UID
}

func newTracker() *tracker { return &tracker{pods: map[string]*podTimes{}} }

func (t *tracker) see(ev watch.Event) {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pods[string(pod.UID)]
	if p == nil {
		p = &podTimes{namespace: pod.Namespace, added: now}
		t.pods[string(pod.UID)] = p
	}
	if p.bound.IsZero() && pod.Spec.NodeName != "" {
		p.bound = now
	}
	if p.running.IsZero() && pod.Status.Phase == corev1.PodRunning && podReady(pod) {
		p.running = now
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startup is what the tracker saw of namespace's pods.
type startup struct {
	pods, running               int
	startup, scheduling         stats.Latency // added to running, added to bound
	firstAdded, lastBound, last time.Time     // last: the last pod running
}

func (t *tracker) of(namespace string) startup {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s startup
	var up, sched []time.Duration
	for _, p := range t.pods {
		if p.namespace != namespace {
			continue
		}
		s.pods++
		if s.firstAdded.IsZero() || p.added.Before(s.firstAdded) {
			s.firstAdded = p.added
		}
		if !p.bound.IsZero() {
			sched = append(sched, p.bound.Sub(p.added))
			if p.bound.After(s.lastBound) {
				s.lastBound = p.bound
			}
		}
		if !p.running.IsZero() {
			s.running++
			up = append(up, p.running.Sub(p.added))
			if p.running.After(s.last) {
				s.last = p.running
			}
		}
	}
	s.startup, s.scheduling = stats.Summarize(up), stats.Summarize(sched)
	return s
}

// waitRunning waits until want pods of namespace run, or timeout.
func (t *tracker) waitRunning(ctx context.Context, namespace string, want int, timeout time.Duration) (startup, error) {
	var s startup
	err := poll.Until(ctx, 500*time.Millisecond, timeout, fmt.Sprintf("%d pods of %s running", want, namespace), func(context.Context) error {
		if s = t.of(namespace); s.running < want {
			return fmt.Errorf("%d of %d running (%d seen)", s.running, want, s.pods)
		}
		return nil
	})
	return s, err
}

// readyEndpoints counts the ready endpoints of namespace's EndpointSlices.
func readyEndpoints(ctx context.Context, client kubernetes.Interface, namespace string) (int, error) {
	list, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		n += readyIn(s)
	}
	return n, nil
}

func readyIn(s discoveryv1.EndpointSlice) int {
	n := 0
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			n++
		}
	}
	return n
}

// waitEndpoints waits until namespace's EndpointSlices hold want ready
// endpoints, and says when they did.
func waitEndpoints(ctx context.Context, client kubernetes.Interface, namespace string, want int, timeout time.Duration) (time.Time, error) {
	err := poll.Until(ctx, 250*time.Millisecond, timeout, fmt.Sprintf("%d ready endpoints in %s", want, namespace), func(ctx context.Context) error {
		n, err := readyEndpoints(ctx, client, namespace)
		if err == nil && n < want {
			err = fmt.Errorf("%d of %d ready", n, want)
		}
		return err
	})
	return time.Now(), err
}
