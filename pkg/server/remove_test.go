package server

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/join"
)

// A removed server's kube-apiserver address is listed in k1m-cluster for
// the agents to forget; a name that published no address lists nothing.
func TestRecordRemovedListsTheServersAddress(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	if err := join.PublishServer(ctx, client, "", nil, "k1m-server-2", "https://[fddf:4035:b520::1:2]:6443", "", join.Datastore{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := recordRemoved(ctx, client, "k1m-server-9", &out); err != nil || out.Len() != 0 {
		t.Fatalf("unknown server: %v, said %q; want nothing", err, out.String())
	}
	if err := recordRemoved(ctx, client, "k1m-server-2", &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "agents forget k1m-server-2 (its kube-apiserver at [fddf:4035:b520::1:2]:6443)\n"; got != want {
		t.Errorf("said %q, want %q", got, want)
	}
	cm, err := client.CoreV1().ConfigMaps(join.PublicNamespace).Get(ctx, join.SettingsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := join.RemovedServers(cm.Data), []string{"[fddf:4035:b520::1:2]:6443"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed servers %q, want %q", got, want)
	}
}
