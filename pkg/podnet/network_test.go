package podnet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"k1m.dev/k1m/pkg/testutil"
)

// A node whose pod ranges the provider routes watches its own Node alone,
// by name, writes the CNI config for its own range, opens no watch of the
// route ConfigMaps and installs no route, although another Node and its
// route ConfigMap exist (the fake client ignores field selectors, so the
// other Node does reach its informer); a node of a k1m-routed cluster
// installs the published route. No root needed: the routes are recorded.
func TestRouteSources(t *testing.T) {
	const ownRange = "fddf:4035:b500:1::/64"
	for _, c := range []struct {
		name      string
		routes    RouteSource
		installed []string
		watched   []string // resource: field selector / label selector
	}{
		{"provider", RoutesByProvider, nil,
			[]string{"nodes: metadata.name=n1 / "}},
		{"published", RoutesPublished, []string{"fddf:4035:b500:2::/64 via fddf:4035:b520::12"},
			[]string{"configmaps:  / " + RouteLabel, "nodes: metadata.name=n1 / "}},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: "n2", Labels: map[string]string{RouteLabel: "true"}},
				Data: map[string]string{routePodCIDRs: "fddf:4035:b500:2::/64", routeVia: "fddf:4035:b520::12"}}
			client := fake.NewSimpleClientset(testNode("n1", ownRange, "fddf:4035:b520::11"), testNode("n2", "fddf:4035:b500:2::/64", "fddf:4035:b520::12"), other)
			kernel := &fakeKernel{}
			dir := t.TempDir()
			nw := Network{Self: "n1", ConfDir: dir, IPAMDir: filepath.Join(dir, "ipam"), Routes: c.routes, kernel: kernel}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			nw.Run(ctx, client)
			testutil.Eventually(t, 5*time.Second, "the CNI config for "+ownRange, func() error {
				conf, err := os.ReadFile(filepath.Join(dir, "10-k1m.conflist"))
				if err != nil || !strings.Contains(string(conf), `"subnet": "`+ownRange+`"`) {
					return fmt.Errorf("%v: %s", err, conf)
				}
				return nil
			})
			// The informers handle their first lists at once: a route, if
			// any were to come, comes well within this.
			time.Sleep(300 * time.Millisecond)
			if got := kernel.replaced(); !slices.Equal(got, c.installed) {
				t.Errorf("routes installed: %q, want %q", got, c.installed)
			}
			if got := watches(client.Actions()); !slices.Equal(got, c.watched) {
				t.Errorf("watches: %q, want %q", got, c.watched)
			}
		})
	}
}

// watches lists the watches of actions as "resource: field selector /
// label selector", sorted.
func watches(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if w, ok := a.(k8stesting.WatchAction); ok {
			r := w.GetWatchRestrictions()
			out = append(out, fmt.Sprintf("%s: %s / %s", a.GetResource().Resource, r.Fields, r.Labels))
		}
	}
	slices.Sort(out)
	return out
}

// fakeKernel records the routes a Network installs and removes, and holds
// a table it lists.
type fakeKernel struct {
	mu       sync.Mutex
	table    []kernelRoute
	replaces []string
	removes  []string
}

func (k *fakeKernel) replace(r podRoute) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.replaces = append(k.replaces, r.dst.String()+" via "+r.via.String())
	k.table = slices.DeleteFunc(k.table, func(have kernelRoute) bool { return have.dst.String() == r.dst.String() })
	k.table = append(k.table, kernelRoute{r, RouteProtocol})
	return nil
}

func (k *fakeKernel) remove(r podRoute) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.removes = append(k.removes, r.dst.String()+" via "+r.via.String())
	k.table = slices.DeleteFunc(k.table, func(have kernelRoute) bool {
		return have.dst.String() == r.dst.String() && have.via.Equal(r.via)
	})
	return nil
}

func (k *fakeKernel) list() ([]kernelRoute, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.table), nil
}

func (k *fakeKernel) replaced() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.replaces)
}

func (k *fakeKernel) removed() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.removes)
}

// routes lists the table as "dst via gw proto N", sorted.
func (k *fakeKernel) routes() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, r := range k.table {
		out = append(out, fmt.Sprintf("%s via %s proto %d", r.dst, r.via, r.protocol))
	}
	slices.Sort(out)
	return out
}
