package faults

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Writer creates ConfigMaps PREFIX-00000, PREFIX-00001, ... one after
// another and records the acknowledged ones with their time: the client
// of the crash tests and of the campaign, whose acknowledged writes must
// all survive. A create that fails (or times out: it may still have been
// applied) is not acknowledged, and the next name is tried.
//
// Rate: at most one write per interval per writer (the campaign runs one
// writer per API server at 10 writes/s each); nothing per node.
type Writer struct {
	mu     sync.Mutex
	acked  []string
	times  []time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

// StartWriter starts writing into namespace ns through client, a write
// every interval (0: one right after another).
func StartWriter(ctx context.Context, client kubernetes.Interface, ns, prefix string, interval time.Duration) *Writer {
	ctx, cancel := context.WithCancel(ctx)
	w := &Writer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			began := time.Now()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", prefix, i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
			if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err == nil {
				w.mu.Lock()
				w.acked, w.times = append(w.acked, cm.Name), append(w.times, time.Now())
				w.mu.Unlock()
			} else {
				time.Sleep(100 * time.Millisecond)
			}
			if wait := interval - time.Since(began); wait > 0 {
				time.Sleep(wait)
			}
		}
	}()
	return w
}

// FirstAckAfter waits up to timeout for a write acknowledged after t and
// returns its time; the zero time when none came.
func (w *Writer) FirstAckAfter(ctx context.Context, t time.Time, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for {
		if at := w.ackAfter(t); !at.IsZero() {
			return at
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ackAfter is the time of the first write acknowledged after t, or zero.
func (w *Writer) ackAfter(t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := sort.Search(len(w.times), func(i int) bool { return w.times[i].After(t) })
	if i == len(w.times) {
		return time.Time{}
	}
	return w.times[i]
}

// Stop stops writing and returns the acknowledged names.
func (w *Writer) Stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string{}, w.acked...)
}

// Acknowledged counts the writes acknowledged so far.
func (w *Writer) Acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// Times are the acknowledgement times so far, in order.
func (w *Writer) Times() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time{}, w.times...)
}

// Missing are the acknowledged ConfigMaps of ns that a list through
// client does not show.
func Missing(ctx context.Context, client kubernetes.Interface, ns string, acked []string) ([]string, error) {
	list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	var missing []string
	for _, name := range acked {
		if !have[name] {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// LongestStall is the longest time within [from, to] with no
// acknowledgement in times (of every writer together, any order): how
// long the cluster as a whole took no write.
func LongestStall(times []time.Time, from, to time.Time) time.Duration {
	sorted := append([]time.Time{}, times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Before(sorted[j]) })
	longest, last := time.Duration(0), from
	for _, t := range sorted {
		if t.Before(from) || t.After(to) {
			continue
		}
		longest = max(longest, t.Sub(last))
		last = t
	}
	return max(longest, to.Sub(last))
}
