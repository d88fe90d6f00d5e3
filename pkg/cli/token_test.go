package cli

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/serverbundle"
)

func TestPrintTokens(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printTokens(&out, []join.TokenInfo{
		{ID: "aaaaaa", Description: join.ServerTokenDescription},
		{ID: "bbbbbb", Expires: now.Add(time.Hour), Description: "rack 7"},
		{ID: "cccccc", Expires: now.Add(-time.Hour)},
	}, now)
	want := "ID      EXPIRES                         DESCRIPTION\n" +
		"aaaaaa  never                           k1m server join token (DATA-DIR/token)\n" +
		"bbbbbb  2026-11-23T13:00:00Z            rack 7\n" +
		"cccccc  2026-11-23T11:00:00Z (expired)  \n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestRotateReplacesTheServerToken(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	ca, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	old, _ := newToken(ca.CertPEM)
	join.CreateToken(ctx, client, old, 0, join.ServerTokenDescription)
	dataDir := t.TempDir()
	path := server.TokenFile(dataDir)
	os.WriteFile(path, []byte(old.String()+"\n"), 0o600)
	var out bytes.Buffer
	if err := rotate(ctx, client, ca.CertPEM, dataDir, &out); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	now, err := pki.ParseToken(string(data))
	if err != nil || now.TokenID() == old.TokenID() || now.CAHash != old.CAHash || now.IsServerToken() {
		t.Fatalf("DATA-DIR/token after rotate: %q, %v", data, err)
	}
	if _, err := client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+old.TokenID(), metav1.GetOptions{}); err == nil {
		t.Error("the old token's Secret is still there")
	}
	if _, err := client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+now.TokenID(), metav1.GetOptions{}); err != nil {
		t.Errorf("the new token's Secret: %v", err)
	}
	if _, err := os.Stat(server.ServerTokenFile(dataDir)); !os.IsNotExist(err) {
		t.Errorf("a lone server got a server token: %v", err)
	}
}

// sealedServer is the data directory of a server of several holding the
// shared files, and their bundle sealed with a fresh seal.
func sealedServer(t *testing.T) (dataDir, seal string, bundle serverbundle.Bundle, sealed []byte) {
	t.Helper()
	dataDir = t.TempDir()
	tlsDir := server.TLSDir(dataDir)
	os.MkdirAll(tlsDir, 0o700)
	for _, name := range serverbundle.SharedFiles {
		os.WriteFile(filepath.Join(tlsDir, name), []byte("content of "+name), 0o600)
	}
	os.WriteFile(filepath.Join(dataDir, "multi-server"), []byte("--cluster-init\n"), 0o600)
	seal, _ = pki.NewSeal()
	bundle, err := serverbundle.Read(tlsDir, false)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err = serverbundle.Seal(bundle, seal)
	if err != nil {
		t.Fatal(err)
	}
	return dataDir, seal, bundle, sealed
}

// On a server of several, rotate makes a new seal: the bundle is sealed
// with it alone (the old seal's and a join token's entries are gone in
// the same write), DATA-DIR/server-token holds it, and the old server
// token opens nothing.
func TestRotateReplacesTheSeal(t *testing.T) {
	ctx := context.Background()
	dataDir, oldSeal, bundle, oldSealed := sealedServer(t)
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: join.ServerBootstrapName},
		Data: map[string]string{"bundle." + serverbundle.SealID(oldSeal): string(oldSealed), "token.abcdef": "legacy", "server.s1": "https://[fddf:4035:b520::1:1]:6443"}})
	ca, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	var out bytes.Buffer
	if err := rotate(ctx, client, ca.CertPEM, dataDir, &out); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(server.ServerTokenFile(dataDir))
	now, err := pki.ParseToken(string(data))
	if err != nil || !now.IsServerToken() || now.Seal == oldSeal {
		t.Fatalf("DATA-DIR/server-token after rotate: %q, %v", data, err)
	}
	cm, _ := client.CoreV1().ConfigMaps("kube-system").Get(ctx, join.ServerBootstrapName, metav1.GetOptions{})
	newKey := "bundle." + serverbundle.SealID(now.Seal)
	if len(cm.Data) != 2 || cm.Data["server.s1"] == "" || cm.Data[newKey] == "" {
		t.Fatalf("k1m-server-bootstrap after rotate: keys %v, want server.s1 and %s only", slices.Sorted(maps.Keys(cm.Data)), newKey)
	}
	if got, err := serverbundle.Open([]byte(cm.Data[newKey]), now.Seal); err != nil || !reflect.DeepEqual(got, bundle) {
		t.Errorf("the new server token opens %+v, %v", got, err)
	}
	if _, err := serverbundle.Open([]byte(cm.Data[newKey]), oldSeal); !errors.Is(err, serverbundle.ErrWrongToken) {
		t.Errorf("the old server token: %v, want ErrWrongToken", err)
	}
}
