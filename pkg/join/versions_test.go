package join

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// Each server's release is recorded when it publishes, replaced at its
// next start, kept when another publishes, and forgotten when it is
// removed; agents and joining servers read them with the settings.
func TestServerVersionsRecordedReplacedAndForgotten(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	const s1, s2 = "https://[fddf:4035:b520::1:1]:6443", "https://[fddf:4035:b520::1:2]:6443"
	const a1, a2 = "[fddf:4035:b520::1:1]:6443", "[fddf:4035:b520::1:2]:6443"
	for _, p := range []struct{ url, release string }{{s1, "v1.32.5+k1m.aaaa"}, {s2, "v1.32.5+k1m.bbbb"}, {s1, "v1.33.0+k1m.cccc"}} {
		if err := Publish(ctx, client, []byte("CA"), p.url, p.release, testSettings); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{a1: "v1.33.0+k1m.cccc", a2: "v1.32.5+k1m.bbbb"}
	if got, err := ReadServerVersions(ctx, client); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after three starts: %v, %v; want %v", got, err, want)
	}
	if got := settingsData(t, client)[serverVersionsKey]; got != `{"[fddf:4035:b520::1:1]:6443":"v1.33.0+k1m.cccc","[fddf:4035:b520::1:2]:6443":"v1.32.5+k1m.bbbb"}` {
		t.Errorf("k1m-cluster's %s: %s", serverVersionsKey, got)
	}
	if err := RecordRemovedServer(ctx, client, a2); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{a1: "v1.33.0+k1m.cccc"}
	if got, err := ReadServerVersions(ctx, client); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after removing server 2: %v, %v; want %v", got, err, want)
	}
	if got, err := ReadServerVersions(ctx, fake.NewClientset()); err != nil || len(got) != 0 {
		t.Errorf("no k1m-cluster: %v, %v; want none", got, err)
	}
}
