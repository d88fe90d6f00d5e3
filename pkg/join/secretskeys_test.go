package join

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// startEtcd runs a plain etcd member for the test.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// The ConfigMap as kube-apiserver stores it (protobuf, its default media
// type) is read back from etcd, with and without a quorum read.
func TestSecretsKeysFromEtcdReadsWhatKubeAPIServerStores(t *testing.T) {
	ctx := context.Background()
	cli := startEtcd(t)
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
