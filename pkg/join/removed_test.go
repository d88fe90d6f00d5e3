package join

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/constants"
)

var testSettings = Settings{RenewInterval: 10 * time.Second, LeaseDurationSeconds: 40, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", ClusterCIDR: "fddf:4035:b500::/44", ServiceCIDR: "fddf:4035:b510::/108", PodRoutes: constants.PodRoutesK1m}

func settingsData(t *testing.T, client *fake.Clientset) map[string]string {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(PublicNamespace).Get(context.Background(), SettingsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

// Removals are recorded in k1m-cluster, kept when a server publishes,
// but for the publishing server's own address; the newest are kept.
func TestRemovedServersRecordedAndKept(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	const s1, s2, s3 = "https://[fddf:4035:b520::1:1]:6443", "https://[fddf:4035:b520::1:2]:6443", "https://[fddf:4035:b520::1:3]:6443"
	if err := Publish(ctx, client, []byte("CA"), s1, "", testSettings); err != nil {
		t.Fatal(err)
	}
	if got, want := settingsData(t, client), testSettings.Data(); !reflect.DeepEqual(got, want) {
		t.Fatalf("k1m-cluster %v, want %v", got, want)
	}
	for _, a := range []string{"[fddf:4035:b520::1:2]:6443", "[fddf:4035:b520::1:3]:6443", "[fddf:4035:b520::1:2]:6443"} {
		if err := RecordRemovedServer(ctx, client, a); err != nil {
			t.Fatal(err)
		}
	}
	want := testSettings.Data()
	want[removedServersKey] = `["[fddf:4035:b520::1:3]:6443","[fddf:4035:b520::1:2]:6443"]`
	if got := settingsData(t, client); !reflect.DeepEqual(got, want) {
		t.Fatalf("after removals %v, want %v", got, want)
	}
	// Another server publishes (new settings): the list stays.
	next := testSettings
	next.RenewInterval = 5 * time.Second
	if err := Publish(ctx, client, []byte("CA"), s1, "", next); err != nil {
		t.Fatal(err)
	}
	want = next.Data()
	want[removedServersKey] = `["[fddf:4035:b520::1:3]:6443","[fddf:4035:b520::1:2]:6443"]`
	if got := settingsData(t, client); !reflect.DeepEqual(got, want) {
		t.Fatalf("after another server published %v, want %v", got, want)
	}
	// Server 2 joins again at its old address: no longer removed.
	if err := Publish(ctx, client, []byte("CA"), s2, "", next); err != nil {
		t.Fatal(err)
	}
	want[removedServersKey] = `["[fddf:4035:b520::1:3]:6443"]`
	if got := settingsData(t, client); !reflect.DeepEqual(got, want) {
		t.Fatalf("after server 2 came back %v, want %v", got, want)
	}
	if got, want := RemovedServers(want), []string{"[fddf:4035:b520::1:3]:6443"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RemovedServers %v, want %v", got, want)
	}
	// And server 3: the key goes.
	if err := Publish(ctx, client, []byte("CA"), s3, "", next); err != nil {
		t.Fatal(err)
	}
	if got, want := settingsData(t, client), next.Data(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after server 3 came back %v, want %v", got, want)
	}
}

func TestRemovedServersBounded(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	var all []string
	for i := range MaxRemovedServers + 5 {
		a := fmt.Sprintf("[fddf:4035:b520::2:%x]:6443", i)
		all = append(all, a)
		if err := RecordRemovedServer(ctx, client, a); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := RemovedServers(settingsData(t, client)), all[5:]; !reflect.DeepEqual(got, want) {
		t.Errorf("kept %v, want the newest %d: %v", got, MaxRemovedServers, want)
	}
}

func TestRemovedServersDamaged(t *testing.T) {
	for _, data := range []map[string]string{nil, {removedServersKey: "not json"}, {removedServersKey: `{"a":1}`}} {
		if got := RemovedServers(data); got != nil {
			t.Errorf("RemovedServers(%v) = %v, want none", data, got)
		}
	}
}

func TestServerAddress(t *testing.T) {
	for in, want := range map[string]string{
		"https://[fddf:4035:b520::1:1]:6443": "[fddf:4035:b520::1:1]:6443",
		"https://k1m.example:6443/":          "k1m.example:6443",
	} {
		if got, err := ServerAddress(in); got != want || err != nil {
			t.Errorf("ServerAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"https://k1m.example", "::1"} {
		if got, err := ServerAddress(in); err == nil {
			t.Errorf("ServerAddress(%q) = %q, want an error", in, got)
		}
	}
}
