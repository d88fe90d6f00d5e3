package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/join"
)

// TestWatchSettingsSendsTheFirstLeaseChange: k1m-cluster as it is, a
// change outside the lease profile and settings that do not parse send
// nothing; the first new lease profile is sent, once.
func TestWatchSettingsSendsTheFirstLeaseChange(t *testing.T) {
	running := join.Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a",
		ClusterCIDR: "fddf:4035:b500::/48", ServiceCIDR: "fddf:4035:b510::/108", PodRoutes: constants.PodRoutesK1m}
	otherDNS := running
	otherDNS.ClusterDNS = "fddf:4035:b510::b"
	next := running
	next.RenewInterval, next.LeaseDurationSeconds = 5*time.Second, 20
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: join.PublicNamespace, Name: join.SettingsName}, Data: running.Data()}
	client := fake.NewSimpleClientset(cm)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := watchSettings(ctx, client, running, nil, nil)
	update := func(data map[string]string) {
		cm = cm.DeepCopy()
		cm.Data = data
		if _, err := client.CoreV1().ConfigMaps(join.PublicNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(otherDNS.Data())
	update(map[string]string{"renewInterval": "soon"})
	select {
	case got := <-changed:
		t.Fatalf("sent %+v before the lease profile changed", got)
	case <-time.After(300 * time.Millisecond):
	}
	update(next.Data())
	select {
	case got := <-changed:
		if !reflect.DeepEqual(got, next) {
			t.Errorf("sent %+v, want %+v", got, next)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change sent")
	}
}

// TestWatchSettingsPassesRemovedServers: each version of k1m-cluster's
// removed servers reaches the balancer, without a lease change.
func TestWatchSettingsPassesRemovedServers(t *testing.T) {
	running, _, client, ctx := publishedSettings(t)
	got := make(chan []string, 10)
	watchSettings(ctx, client, running, func(r []string) { got <- r }, nil)
	next := func() []string {
		select {
		case r := <-got:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("nothing passed")
			return nil
		}
	}
	if r := next(); r != nil {
		t.Errorf("at first: %q, want none", r)
	}
	if err := join.RecordRemovedServer(ctx, client, "[fddf:4035:b520::1:2]:6443"); err != nil {
		t.Fatal(err)
	}
	if r, want := next(), []string{"[fddf:4035:b520::1:2]:6443"}; !reflect.DeepEqual(r, want) {
		t.Errorf("after a removal: %q, want %q", r, want)
	}
}

// TestForgetTokenFile: a node that resumes on its own certificate deletes
// a token file a reinstall wrote again; none there is fine.
func TestForgetTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(path, []byte("K1M...\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := forgetTokenFile(path, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("token file still there: %v", err)
	}
	if want := "k1m agent: deleted --token-file " + path + "\n"; out.String() != want {
		t.Errorf("said %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := forgetTokenFile(path, &out); err != nil || out.Len() != 0 {
		t.Errorf("again: %v, said %q; want nothing", err, out.String())
	}
}

func TestRestartDelayIsAcrossTheSpread(t *testing.T) {
	for _, c := range []struct {
		spread time.Duration
		r      float64
		want   time.Duration
	}{
		{0, 0.7, 0},                // an earlier server's settings: at once
		{1000 * time.Second, 0, 0}, // the first of the cluster
		{1000 * time.Second, 0.25, 250 * time.Second},  // a quarter in
		{1000 * time.Second, 0.999, 999 * time.Second}, // the last, within the spread
	} {
		if got := restartDelay(c.spread, c.r); got != c.want {
			t.Errorf("restartDelay(%s, %v) = %s, want %s", c.spread, c.r, got, c.want)
		}
	}
}

// TestWatchSettingsPassesTheRebalanceSpread: each version's rebalance
// spread reaches the balancer, without a lease change; absent, 0.
func TestWatchSettingsPassesTheRebalanceSpread(t *testing.T) {
	running, cm, client, ctx := publishedSettings(t)
	got := make(chan time.Duration, 10)
	changed := watchSettings(ctx, client, running, nil, func(d time.Duration) { got <- d })
	next := func() time.Duration {
		select {
		case d := <-got:
			return d
		case <-time.After(5 * time.Second):
			t.Fatal("no spread passed")
			return 0
		}
	}
	if d := next(); d != 0 {
		t.Errorf("at first: %v, want 0", d)
	}
	larger := running
	larger.RebalanceSpread = 128 * time.Second
	cm = cm.DeepCopy()
	cm.Data = larger.Data()
	if _, err := client.CoreV1().ConfigMaps(join.PublicNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := next(); d != 128*time.Second {
		t.Errorf("after the update: %v, want 2m8s", d)
	}
	select {
	case s := <-changed:
		t.Errorf("a rebalance spread taken for a lease profile change: %+v", s)
	default:
	}
}

// publishedSettings are a cluster's settings, published in k1m-cluster
// on a fake API, for the test's life.
func publishedSettings(t *testing.T) (join.Settings, *corev1.ConfigMap, *fake.Clientset, context.Context) {
	running := join.Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a",
		ClusterCIDR: "fddf:4035:b500::/48", ServiceCIDR: "fddf:4035:b510::/108", PodRoutes: constants.PodRoutesK1m}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: join.PublicNamespace, Name: join.SettingsName}, Data: running.Data()}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return running, cm, fake.NewSimpleClientset(cm), ctx
}
