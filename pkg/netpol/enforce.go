package netpol

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"k1m.dev/k1m/pkg/clock"
)

// Enforcer keeps a node's nftables table in line with the rules the
// servers publish for it: one watch, of its own ConfigMap by name.
type Enforcer struct {
	Client kubernetes.Interface
	Node   string
	// Apply loads an nft script (nft -f -); tests replace it.
	Apply func(ctx context.Context, script string) error
}

// retry is how soon a failed load is tried again.
const retry = 5 * time.Second

// Run enforces until ctx ends. What an earlier run loaded stays until
// this node's rules are read (a restart, or servers out of reach, opens no
// window without policies); then the table is replaced with them. A
// missing or deleted ConfigMap is no rules: a node without published
// rules isolates nothing.
func (e *Enforcer) Run(ctx context.Context) {
	apply := e.Apply
	if apply == nil {
		apply = ApplyNft
	}
	updates := make(chan *corev1.ConfigMap, 1)
	send := func(cm *corev1.ConfigMap) {
		select { // keep only the newest
		case <-updates:
		default:
		}
		updates <- cm
	}
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", e.Node).String()
	}
	cms := e.Client.CoreV1().ConfigMaps(Namespace)
	lw := &cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { byName(&o); return cms.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { byName(&o); return cms.Watch(ctx, o) },
	}
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { send(o.(*corev1.ConfigMap)) },
			UpdateFunc: func(_, o any) { send(o.(*corev1.ConfigMap)) },
			DeleteFunc: func(any) { send(nil) },
		},
	})
	go informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	// The store holds what the first list found; an event after the drain
	// comes through updates.
	select {
	case <-updates:
	default:
	}
	var current *corev1.ConfigMap
	if o, ok, _ := store.GetByKey(Namespace + "/" + e.Node); ok {
		current = o.(*corev1.ConfigMap)
	}
	pending := true
	for {
		if pending {
			if err := e.load(ctx, apply, current); err != nil {
				klog.ErrorS(err, "enforcing network policies", "node", e.Node)
				if clock.Sleep(ctx, retry) != nil {
					return
				}
				continue
			}
			pending = false
		}
		select {
		case <-ctx.Done():
			return
		case current = <-updates:
			pending = true
		}
	}
}

// load renders cm's rules (none for nil) and applies them.
func (e *Enforcer) load(ctx context.Context, apply func(context.Context, string) error, cm *corev1.ConfigMap) error {
	var rules []PodRules
	if cm != nil {
		var err error
		if rules, err = DecodeRules(cm); err != nil {
			return err
		}
	}
	if err := apply(ctx, Render(rules)); err != nil {
		return err
	}
	klog.V(2).InfoS("network policy rules loaded", "node", e.Node, "pods", len(rules))
	return nil
}

// ApplyNft loads script with nft -f - in this network namespace.
func ApplyNft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
