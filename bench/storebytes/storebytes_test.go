package storebytes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"k1m.dev/k1m/pkg/testutil/etcdtest"
)

// stored encodes obj as kube-apiserver stores it: protobuf, with the
// k8s\x00 envelope.
func stored(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func pod(name string, managedFields int) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "fd00:10::1"}}
	for i := 0; i < managedFields; i++ {
		p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{Manager: fmt.Sprintf("manager-%d", i), Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}})
	}
	return p
}

func TestDecodeSizesAValueWithoutItsManagedFieldsExactly(t *testing.T) {
	with, without := stored(t, pod("p", 3)), stored(t, pod("p", 0))
	got, err := Decode(with)
	if want := (Value{Kind: "Pod", WithoutManagedFields: len(without)}); err != nil || got != want {
		t.Errorf("Decode(a Pod with 3 managedFields entries) = %+v, %v; want %+v (%d bytes with them)", got, err, want, len(with))
	}
	got, err = Decode(without)
	if want := (Value{Kind: "Pod", WithoutManagedFields: len(without)}); err != nil || got != want {
		t.Errorf("Decode(a Pod without managedFields) = %+v, %v; want %+v", got, err, want)
	}
	lease := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	got, err = Decode(stored(t, lease))
	if want := (Value{Kind: "Lease", WithoutManagedFields: len(stored(t, lease))}); err != nil || got != want {
		t.Errorf("Decode(a Lease) = %+v, %v; want %+v", got, err, want)
	}
}

func TestDecodeReadsCustomResourcesAndEncryptedValues(t *testing.T) {
	json := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"managedFields":[{"manager":"m"}],"name":"w"},"spec":{"size":1}}` + "\n"
	wantJSON := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}` + "\n"
	cases := []struct {
		value string
		want  Value
	}{
		{json, Value{Kind: "Widget", WithoutManagedFields: len(wantJSON)}},
		{"k8s:enc:aescbc:v1:key1:secret", Value{Kind: "encrypted", WithoutManagedFields: 29}},
	}
	for _, tc := range cases {
		if got, err := Decode([]byte(tc.value)); err != nil || got != tc.want {
			t.Errorf("Decode(%q) = %+v, %v; want %+v", tc.value, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "plain", "k8s\x00\xff\xff", `{"metadata":{}}`} {
		if got, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) = %+v; want an error", bad, got)
		}
	}
}

func TestClassifierPlacesKeysByNodeAndNamespace(t *testing.T) {
	c := Classifier{Nodes: map[string]bool{"node-1": true}, Namespace: "work"}
	for key, want := range map[string]Class{
		"/registry/minions/node-1":                     PerNode,
		"/registry/leases/kube-node-lease/node-1":      PerNode,
		"/registry/configmaps/k1m-pod-routes/node-1":   PerNode,
		"/registry/pods/work/app-1":                    PerPod,
		"/registry/services/specs/work/app":            PerPod,
		"/registry/events/work/app-1.17a":              PerPod,
		"/registry/pods/kube-system/coredns-1":         Other,
		"/registry/namespaces/work":                    Other, // the namespace itself
		"/registry/events/default/node-1.17b":          Other,
		"/registry/clusterroles/system:node-1-proxier": Other,
	} {
		if got := c.Class(key); got != want {
			t.Errorf("Class(%s) = %s, want %s", key, got, want)
		}
	}
}

func TestReadKindsAddsUpEveryPageAtOneRevision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, endpoint := etcdtest.Start(t)
	podValue := stored(t, pod("p", 2))
	podNoMF, err := Decode(podValue)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	nodeValue := stored(t, node)
	const pods = 2*pageSize + 1 // three pages
	var podKeys int64
	for i := 0; i < pods; i++ {
		key := fmt.Sprintf("/registry/pods/work/app-%04d", i)
		podKeys += int64(len(key))
		// Written twice: the first revision is history, not counted.
		for range 2 {
			if _, err := cli.Put(ctx, key, string(podValue)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cli.Put(ctx, "/registry/minions/node-1", string(nodeValue)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "compact_rev_key", "outside /registry/"); err != nil {
		t.Fatal(err)
	}
	c := Classifier{Nodes: map[string]bool{"node-1": true}, Namespace: "work"}
	kinds, rev, err := ReadKinds(ctx, cli, "durable", c)
	if err != nil {
		t.Fatal(err)
	}
	want := []Kind{
		{Store: "durable", Kind: "Node", Class: PerNode, Count: 1, KeyBytes: int64(len("/registry/minions/node-1")), ValueBytes: int64(len(nodeValue)),
			NoManagedFieldsBytes: int64(len(nodeValue)), MaxValueBytes: len(nodeValue)},
		{Store: "durable", Kind: "Pod", Class: PerPod, Count: pods, KeyBytes: podKeys, ValueBytes: int64(pods * len(podValue)),
			NoManagedFieldsBytes: int64(pods * podNoMF.WithoutManagedFields), MaxValueBytes: len(podValue)},
	}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("ReadKinds() =\n%+v\nwant\n%+v", kinds, want)
	}
	before, err := Status(ctx, cli, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if rev != before.Revision {
		t.Errorf("ReadKinds read at revision %d, the store is at %d", rev, before.Revision)
	}
	after, err := CompactAndDefragment(ctx, cli, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision != before.Revision || after.Size >= before.Size || after.InUse > after.Size {
		t.Errorf("CompactAndDefragment: file %+v before, %+v after; want the same revision in a smaller file", before, after)
	}
	if _, err := cli.Get(ctx, "/registry/pods/work/app-0000", clientv3.WithRev(before.Revision-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("a read before the compaction's revision: %v; want it compacted", err)
	}
}

func TestWatchWritesCountsUpToTheRevisionAsked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, endpoint := etcdtest.Start(t)
	lease := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	value := stored(t, lease)
	const key = "/registry/leases/kube-node-lease/node-1"
	start, err := Status(ctx, cli, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	w := WatchWrites(ctx, cli, "no-fsync", Classifier{Nodes: map[string]bool{"node-1": true}}, start.Revision)
	for range 3 {
		if _, err := cli.Put(ctx, key, string(value)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	until, err := Status(ctx, cli, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	// After the revision asked for: not counted.
	if _, err := cli.Put(ctx, key, string(value)); err != nil {
		t.Fatal(err)
	}
	got, err := w.Stop(until.Revision)
	want := []Kind{
		{Store: "no-fsync", Kind: "Lease", Class: PerNode, Count: 3, KeyBytes: 3 * int64(len(key)), ValueBytes: 3 * int64(len(value)),
			NoManagedFieldsBytes: 3 * int64(len(value)), MaxValueBytes: len(value)},
		{Store: "no-fsync", Kind: "(deleted)", Class: PerNode, Count: 1, KeyBytes: int64(len(key))},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Stop(%d) = %+v, %v\nwant %+v", until.Revision, got, err, want)
	}
}
