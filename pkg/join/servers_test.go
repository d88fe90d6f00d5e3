package join

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/serverbundle"
)

// bootstrapServer serves k1m-server-bootstrap with data to the bearer
// secret; 404 when data is nil.
func bootstrapServer(t *testing.T, secret string, data map[string]string) (*httptest.Server, []byte) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/api/v1/namespaces/kube-system/configmaps/"+ServerBootstrapName || r.Header.Get("Authorization") != "Bearer "+secret:
			w.WriteHeader(http.StatusUnauthorized)
		case data == nil:
			w.WriteHeader(http.StatusNotFound)
		default:
			json.NewEncoder(w).Encode(map[string]any{"kind": "ConfigMap", "data": data})
		}
	})
	t.Cleanup(srv.Close)
	return srv, certPEM(srv)
}

const (
	testSeal      = "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	otherSeal     = "bbcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	legacyEntry   = "token.abcdef"
	testSecretKey = "abcdef.0123456789abcdef"
)

var testBundleKey = "bundle." + serverbundle.SealID(testSeal)

func TestFetchServerBootstrap(t *testing.T) {
	const secret = testSecretKey
	data := map[string]string{
		testBundleKey:               `{"sealed":true}`,
		legacyEntry:                 `{"legacy":true}`,
		"durable-etcd.k1m-server-1": "https://[fddf:4035:b520::1:1]:2379",
		"durable-etcd.k1m-server-2": "https://[fddf:4035:b520::1:2]:2379",
	}
	srv, caPEM := bootstrapServer(t, secret, data)
	hash, _ := pki.CAHash(caPEM)
	ctx := context.Background()
	got, err := FetchServerBootstrap(ctx, srv.URL, caPEM, pki.Token{CAHash: hash, Secret: secret, Seal: testSeal})
	if err != nil {
		t.Fatal(err)
	}
	want := ServerBootstrap{Sealed: []byte(`{"sealed":true}`), DurableEtcd: map[string]string{
		"k1m-server-1": "https://[fddf:4035:b520::1:1]:2379", "k1m-server-2": "https://[fddf:4035:b520::1:2]:2379"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fetched %+v, want %+v", got, want)
	}
	if urls := got.DurableEtcdURLs(); !reflect.DeepEqual(urls, []string{"https://[fddf:4035:b520::1:1]:2379", "https://[fddf:4035:b520::1:2]:2379"}) {
		t.Errorf("DurableEtcdURLs %v", urls)
	}

	// A join token (no seal) authenticates but opens nothing; a seal the
	// cluster no longer uses (rotated) finds no bundle, and says so.
	var je *Error
	_, err = FetchServerBootstrap(ctx, srv.URL, caPEM, pki.Token{CAHash: hash, Secret: secret})
	if !errors.Is(err, ErrNotServerToken) || !errors.As(err, &je) || je.Input != InputToken ||
		err.Error() != "token: not a server token: token abcdef is a join token for agents (it has no seal): join servers with a server's DATA-DIR/server-token" {
		t.Errorf("a join token: %v, want ErrNotServerToken about the token", err)
	}
	_, err = FetchServerBootstrap(ctx, srv.URL, caPEM, pki.Token{CAHash: hash, Secret: secret, Seal: otherSeal})
	if !errors.As(err, &je) || je.Input != InputToken ||
		err.Error() != "token: its seal is not the cluster's (the server token was rotated, k1m token rotate): use DATA-DIR/server-token of the server it was rotated on" {
		t.Errorf("a rotated seal: %v", err)
	}
	delete(data, testBundleKey)
	legacySrv, legacyCA := bootstrapServer(t, secret, data)
	legacyHash, _ := pki.CAHash(legacyCA)
	_, err = FetchServerBootstrap(ctx, legacySrv.URL, legacyCA, pki.Token{CAHash: legacyHash, Secret: secret, Seal: testSeal})
	if err == nil || !strings.HasPrefix(err.Error(), "token: no server has published the shared files for a server token yet") {
		t.Errorf("only a legacy entry: %v", err)
	}
	// A wrong secret is refused by the server.
	_, err = FetchServerBootstrap(ctx, srv.URL, caPEM, pki.Token{CAHash: hash, Secret: "abcdef.0000000000000000", Seal: testSeal})
	if err == nil || err.Error() != "token: the server refused the token (401 Unauthorized): it is mistyped, expired or deleted" {
		t.Errorf("a wrong secret: %v", err)
	}
	// A lone server (no --cluster-init) publishes no server bundle.
	lone, loneCA := bootstrapServer(t, secret, nil)
	loneHash, _ := pki.CAHash(loneCA)
	_, err = FetchServerBootstrap(ctx, lone.URL, loneCA, pki.Token{CAHash: loneHash, Secret: secret, Seal: testSeal})
	if err == nil || !errors.As(err, &je) || je.Input != InputServer || !strings.HasPrefix(err.Error(), "server: it is not a server of a multi-server cluster") {
		t.Errorf("a lone server: %v", err)
	}
	// A CA other than the token's is refused before the secret is sent.
	other, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "another-ca")
	if err != nil {
		t.Fatal(err)
	}
	_, err = FetchServerBootstrap(ctx, srv.URL, other.CertPEM, pki.Token{CAHash: hash, Secret: secret, Seal: testSeal})
	if !errors.As(err, &je) || je.Input != InputToken {
		t.Errorf("a CA the token does not name: %v", err)
	}
}

// Each server publishes its own keys; an API-server-only server no etcd
// key; a removed server's keys go, the others' stay.
func TestPublishKnowForgetServers(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ServerBootstrapName},
		Data: map[string]string{legacyEntry: "sealed with a join token's secret"}})
	sealID := serverbundle.SealID(testSeal)
	if err := PublishServer(ctx, client, sealID, []byte("sealed"), "s1", "https://[fddf:4035:b520::1:1]:6443", "https://[fddf:4035:b520::1:1]:2379", Datastore{}); err != nil {
		t.Fatal(err)
	}
	if err := PublishServer(ctx, client, sealID, []byte("sealed"), "api4", "https://[fddf:4035:b520::1]:6443", "", Datastore{}); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, ServerBootstrapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{testBundleKey: "sealed", "server.s1": "https://[fddf:4035:b520::1:1]:6443",
		"durable-etcd.s1": "https://[fddf:4035:b520::1:1]:2379", "server.api4": "https://[fddf:4035:b520::1]:6443", "datastore": "{}"}
	if !reflect.DeepEqual(cm.Data, want) {
		t.Errorf("data %v, want %v", cm.Data, want)
	}
	for node, wantKnown := range map[string]bool{"s1": true, "api4": true, "typo": false} {
		if known, err := ServerKnown(ctx, client, node); err != nil || known != wantKnown {
			t.Errorf("ServerKnown(%s) = %v, %v; want %v", node, known, err, wantKnown)
		}
	}
	if err := ForgetServer(ctx, client, "api4"); err != nil {
		t.Fatal(err)
	}
	if known, _ := ServerKnown(ctx, client, "api4"); known {
		t.Error("api4 still known after ForgetServer")
	}
	if known, _ := ServerKnown(ctx, client, "s1"); !known {
		t.Error("ForgetServer(api4) forgot s1")
	}
}

// A cluster on an external durable etcd has no server etcd records: the
// datastore key is what a joining server needs.
func TestFetchServerBootstrapExternalDatastore(t *testing.T) {
	const secret = testSecretKey
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	stores := Datastore{Durable: []string{"https://[fddf:4035:b520::5]:2379"}}
	if err := PublishServer(ctx, client, serverbundle.SealID(testSeal), []byte("sealed"), "s1", "https://[fddf:4035:b520::1:1]:6443", "", stores); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, ServerBootstrapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv, caPEM := bootstrapServer(t, secret, cm.Data)
	hash, _ := pki.CAHash(caPEM)
	got, err := FetchServerBootstrap(ctx, srv.URL, caPEM, pki.Token{CAHash: hash, Secret: secret, Seal: testSeal})
	if err != nil {
		t.Fatal(err)
	}
	want := ServerBootstrap{Sealed: []byte("sealed"), DurableEtcd: map[string]string{}, Datastore: stores}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fetched %+v, want %+v", got, want)
	}
	// Neither a server etcd nor an external one: not a cluster to join.
	delete(cm.Data, "datastore")
	srv, caPEM = bootstrapServer(t, secret, cm.Data)
	hash, _ = pki.CAHash(caPEM)
	_, err = FetchServerBootstrap(ctx, srv.URL, caPEM, pki.Token{CAHash: hash, Secret: secret, Seal: testSeal})
	if err == nil || err.Error() != "server: kube-system/k1m-server-bootstrap names no server's etcd: is the first server running with --cluster-init?" {
		t.Errorf("no etcd named: %v", err)
	}
}

// A rotation replaces the bundle in one write; a server still holding the
// old seal records itself but does not bring its bundle back.
func TestRotatedSealIsNotRepublished(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	oldID, newID := serverbundle.SealID(testSeal), serverbundle.SealID(otherSeal)
	if err := PublishServer(ctx, client, oldID, []byte("old"), "s1", "https://[fddf:4035:b520::1:1]:6443", "", Datastore{}); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceBundle(ctx, client, newID, []byte("new")); err != nil {
		t.Fatal(err)
	}
	err := PublishServer(ctx, client, oldID, []byte("old"), "s2", "https://[fddf:4035:b520::1:2]:6443", "", Datastore{})
	if !errors.Is(err, ErrSealRotated) {
		t.Errorf("publishing under the old seal after a rotation: %v, want ErrSealRotated", err)
	}
	cm, _ := client.CoreV1().ConfigMaps("kube-system").Get(ctx, ServerBootstrapName, metav1.GetOptions{})
	want := map[string]string{"bundle." + newID: "new", "server.s1": "https://[fddf:4035:b520::1:1]:6443", "server.s2": "https://[fddf:4035:b520::1:2]:6443", "datastore": "{}"}
	if !reflect.DeepEqual(cm.Data, want) {
		t.Errorf("data %v, want %v", cm.Data, want)
	}
}
