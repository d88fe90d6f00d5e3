package podnet

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"k1m.dev/k1m/pkg/constants"
)

// slowCreates is a client whose ConfigMap creates wait until release is
// closed, as on a store slow to commit, counting those in flight. (The
// fake's reactors run under its lock: one that waits would stop every
// request.)
type slowCreates struct {
	*fake.Clientset
	inFlight atomic.Int32
	most     atomic.Int32
	release  chan struct{}
}

func (c *slowCreates) CoreV1() typedcorev1.CoreV1Interface {
	return slowCoreV1{c.Clientset.CoreV1(), c}
}

type slowCoreV1 struct {
	typedcorev1.CoreV1Interface
	c *slowCreates
}

func (s slowCoreV1) ConfigMaps(ns string) typedcorev1.ConfigMapInterface {
	return slowConfigMaps{s.CoreV1Interface.ConfigMaps(ns), s.c}
}

type slowConfigMaps struct {
	typedcorev1.ConfigMapInterface
	c *slowCreates
}

func (s slowConfigMaps) Create(ctx context.Context, cm *corev1.ConfigMap, o metav1.CreateOptions) (*corev1.ConfigMap, error) {
	n := s.c.inFlight.Add(1)
	defer s.c.inFlight.Add(-1)
	for most := s.c.most.Load(); n > most && !s.c.most.CompareAndSwap(most, n); most = s.c.most.Load() {
	}
	select {
	case <-s.c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.ConfigMapInterface.Create(ctx, cm, o)
}

var _ kubernetes.Interface = &slowCreates{}

// The publisher writes routes side by side, 8 at once: a store slow to
// commit does not hold it to one route per commit.
func TestPublisherWritesRoutesSideBySide(t *testing.T) {
	const sideBySide = 8
	var nodes []runtime.Object
	for i := 1; i <= 2*sideBySide; i++ {
		nodes = append(nodes, joined(testNode(fmt.Sprintf("n%d", i), fmt.Sprintf("fddf:4035:b500:%x::/64", i), fmt.Sprintf("fddf:4035:b520::%x", 0x100+i)), int64(i)))
	}
	client := &slowCreates{Clientset: fake.NewSimpleClientset(nodes...), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rules := testRules
	rules.Servers = func(context.Context) (map[string][]netip.Addr, error) { return testServers, nil }
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		PublishRoutes(ctx, client, rules, constants.PodRouteEventsPerSecond)
	}()
	eventually(t, fmt.Sprintf("%d route creates in flight at once", sideBySide), func() bool { return client.inFlight.Load() == sideBySide })
	time.Sleep(100 * time.Millisecond)
	if most := client.most.Load(); most != sideBySide {
		t.Errorf("%d route creates in flight at most, want %d", most, sideBySide)
	}
	close(client.release)
	for i := 1; i <= 2*sideBySide; i++ {
		name := fmt.Sprintf("n%d", i)
		eventually(t, name+"'s route published", func() bool { return routeIn(client.Clientset, name) != nil })
	}
	cancel()
	done.Wait()
}
