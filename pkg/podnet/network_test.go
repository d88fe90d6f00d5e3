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

	"github.com/vishvananda/netlink"
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
			var mu sync.Mutex
			var installed []string
			dir := t.TempDir()
			nw := Network{Self: "n1", ConfDir: dir, IPAMDir: filepath.Join(dir, "ipam"), Routes: c.routes,
				replaceRoute: func(r *netlink.Route) error {
					mu.Lock()
					defer mu.Unlock()
					installed = append(installed, r.Dst.String()+" via "+r.Gw.String())
					return nil
				}}
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
			mu.Lock()
			got := slices.Clone(installed)
			mu.Unlock()
			if !slices.Equal(got, c.installed) {
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
