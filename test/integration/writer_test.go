package integration

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writer creates ConfigMaps PREFIX-00000, PREFIX-00001, ... one after
// another and records the acknowledged ones with their time: the client
// of the crash tests, whose acknowledged writes must all survive.
type writer struct {
	mu     sync.Mutex
	acked  []string
	times  []time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func startWriter(ctx context.Context, client kubernetes.Interface, ns, prefix string) *writer {
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", prefix, i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
			if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err == nil {
				w.mu.Lock()
				w.acked, w.times = append(w.acked, cm.Name), append(w.times, time.Now())
				w.mu.Unlock()
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return w
}

// firstAckAfter waits up to timeout for a write acknowledged after t.
func (w *writer) firstAckAfter(ctx context.Context, t time.Time, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		w.mu.Lock()
		for _, at := range w.times {
			if at.After(t) {
				w.mu.Unlock()
				return at
			}
		}
		w.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}
}

func (w *writer) stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string{}, w.acked...)
}

// acknowledged counts the writes acknowledged so far.
func (w *writer) acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// lostWrites are the acknowledged ConfigMaps of ns that are gone.
func lostWrites(ctx context.Context, client kubernetes.Interface, ns string, acked []string) ([]string, error) {
	list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	var lost []string
	for _, name := range acked {
		if !have[name] {
			lost = append(lost, name)
		}
	}
	return lost, nil
}
