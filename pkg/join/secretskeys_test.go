package join

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"k1m.dev/k1m/pkg/testutil/etcdtest"
)

// The ConfigMap as kube-apiserver stores it (protobuf, its default media
// type) is read back from etcd, with and without a quorum read.
func TestSecretsKeysFromEtcdReadsWhatKubeAPIServerStores(t *testing.T) {
	ctx := context.Background()
	cli, _ := etcdtest.Start(t)
	for _, serializable := range []bool{false, true} {
		if got, err := SecretsKeysFromEtcd(ctx, cli, serializable); err != nil || got != nil {
			t.Errorf("no ConfigMap (serializable %v): %q, %v; want nothing", serializable, got, err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ServerBootstrapName, Namespace: "kube-system"},
		Data: map[string]string{"secrets-encryption": `{"version":1,"sealed":"x"}`, "server.s1": "https://[fddf::1]:6443"}}
	codec := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)
	data, err := runtime.Encode(codec, cm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/registry/configmaps/kube-system/"+ServerBootstrapName, string(data)); err != nil {
		t.Fatal(err)
	}
	for _, serializable := range []bool{false, true} {
		got, err := SecretsKeysFromEtcd(ctx, cli, serializable)
		if err != nil || string(got) != `{"version":1,"sealed":"x"}` {
			t.Errorf("serializable %v: %q, %v", serializable, got, err)
		}
	}
}
