// Package creates measures how long kube-apiserver takes to create a
// Service against a ConfigMap, one at a time and many at once, on a
// running cluster (`k1m-bench creates`). A Service's ClusterIP is
// allocated with a second write of the durable etcd, which each API
// server makes one at a time under its allocator's lock: this shows what
// that costs, apart from any other load (docs/performance.md, "The whole
// cluster").
package creates

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/bench/leaseflood"
	"k1m.dev/k1m/bench/stats"
)

// Namespace holds the objects; it is deleted at the end.
const Namespace = "k1m-bench-creates"

// Kinds are what is created, in this order at each parallelism.
var Kinds = []string{"services", "configmaps"}

// Config is the measurement's size.
type Config struct {
	Count    int   // objects of each kind at each parallelism
	Parallel []int // creates in flight, one measurement each
}

// Validate names the flag at fault.
func (c Config) Validate() error {
	var errs []error
	if c.Count < 1 {
		errs = append(errs, fmt.Errorf("--count %d: want at least 1, e.g. 200", c.Count))
	}
	if len(c.Parallel) == 0 {
		errs = append(errs, errors.New("--parallel is empty: want creates in flight, e.g. 1,20"))
	}
	errs = append(errs, stats.CheckEach("--parallel", c.Parallel, func(p int) bool { return p >= 1 }, "want at least 1 create in flight, e.g. 1,20"))
	return errors.Join(errs...)
}

// Result is one kind at one parallelism.
type Result struct {
	Kind          string
	Parallel      int
	Count         int
	Elapsed       time.Duration
	P50, P90, P99 time.Duration
}

// Line is the result's one-line summary.
func (r Result) Line() string {
	return fmt.Sprintf("%s, %d in flight: %d created at %.0f/s, p50 %s p90 %s p99 %s", r.Kind, r.Parallel, r.Count,
		stats.Rate(int64(r.Count), r.Elapsed), r.P50.Round(100*time.Microsecond), r.P90.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond))
}

// Run creates cfg.Count objects of each kind at each parallelism in
// Namespace, then deletes the namespace; progress hears each result.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface, progress func(string)) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	var results []Result
	err := func() error {
		for _, parallel := range cfg.Parallel {
			for _, kind := range Kinds {
				r, err := measure(ctx, client, kind, fmt.Sprintf("p%d-", parallel), cfg.Count, parallel)
				if err != nil {
					return fmt.Errorf("%s, %d in flight: %w", kind, parallel, err)
				}
				progress(r.Line())
				results = append(results, r)
			}
		}
		return nil
	}()
	del := client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), Namespace, metav1.DeleteOptions{})
	return results, errors.Join(err, del)
}

func measure(ctx context.Context, client kubernetes.Interface, kind, prefix string, count, parallel int) (Result, error) {
	var mu sync.Mutex
	var took []time.Duration
	start := time.Now()
	err := leaseflood.InParallel(count, parallel, func(i int) error {
		t := time.Now()
		if err := create(ctx, client, kind, fmt.Sprintf("%s%05d", prefix, i)); err != nil {
			return err
		}
		mu.Lock()
		took = append(took, time.Since(t))
		mu.Unlock()
		return nil
	})
	r := Result{Kind: kind, Parallel: parallel, Count: len(took), Elapsed: time.Since(start),
		P50: stats.Percentile(took, 50), P90: stats.Percentile(took, 90), P99: stats.Percentile(took, 99)}
	return r, err
}

// create makes one object of kind: a ClusterIP Service with one port and
// a selector, or an empty ConfigMap.
func create(ctx context.Context, client kubernetes.Interface, kind, name string) error {
	meta := metav1.ObjectMeta{Name: name, Namespace: Namespace}
	var err error
	switch kind {
	case "services":
		_, err = client.CoreV1().Services(Namespace).Create(ctx, &corev1.Service{ObjectMeta: meta,
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"k1m.dev/bench": "creates"}}}, metav1.CreateOptions{})
	case "configmaps":
		_, err = client.CoreV1().ConfigMaps(Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("unknown kind %q: want %s", kind, strings.Join(Kinds, " or "))
	}
	return err
}
