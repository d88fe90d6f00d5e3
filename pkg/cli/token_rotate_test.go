package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/serverbundle"
)

// TestRotateLeavesACopyMadeBeforeOpenWithTheOldSeal documents what
// k1m token rotate cannot retire: it seals the same CA keys under a new
// seal, so a copy of kube-system/k1m-server-bootstrap saved before the
// rotation (any join token reads it; every earlier etcd snapshot holds it)
// still opens with the old server token and yields the very keys the
// cluster runs on. Only the bundle the cluster stores now is closed to it.
func TestRotateLeavesACopyMadeBeforeOpenWithTheOldSeal(t *testing.T) {
	ctx := context.Background()
	dataDir, oldSeal, bundle, oldSealed := sealedServer(t)
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: join.ServerBootstrapName},
		Data: map[string]string{"bundle." + serverbundle.SealID(oldSeal): string(oldSealed)}})
	before, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, join.ServerBootstrapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saved := before.DeepCopy()
	ca, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	var out bytes.Buffer
	if err := rotate(ctx, client, ca.CertPEM, dataDir, &out); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(server.ServerTokenFile(dataDir))
	now, err := pki.ParseToken(string(data))
	if err != nil || now.Seal == oldSeal {
		t.Fatalf("DATA-DIR/server-token after rotate: %q, %v", data, err)
	}
	wantOut := "new server token written to " + server.ServerTokenFile(dataDir) + ": the old one joins nothing and no longer opens the bundle the cluster stores; the other servers forget theirs within a minute\n" +
		"the CA keys are unchanged (k1m does not rotate CAs): a copy of kube-system/k1m-server-bootstrap made before this rotation (the ConfigMap as read then, an etcd snapshot taken before) still opens with the old server token; if it leaked, treat the CA keys as exposed: only a new cluster retires them\n" +
		"new join token " + now.TokenID() + " written to " + server.TokenFile(dataDir) + "\n" +
		"a server started with --token puts that token back at its next start: change the flag too\n"
	if out.String() != wantOut {
		t.Errorf("rotate said\n%s\nwant\n%s", out.String(), wantOut)
	}
	cm, _ := client.CoreV1().ConfigMaps("kube-system").Get(ctx, join.ServerBootstrapName, metav1.GetOptions{})
	current, err := serverbundle.Open([]byte(cm.Data["bundle."+serverbundle.SealID(now.Seal)]), now.Seal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serverbundle.Open([]byte(cm.Data["bundle."+serverbundle.SealID(now.Seal)]), oldSeal); !errors.Is(err, serverbundle.ErrWrongToken) {
		t.Errorf("the old seal on the bundle stored now: %v, want ErrWrongToken", err)
	}
	old, err := serverbundle.Open([]byte(saved.Data["bundle."+serverbundle.SealID(oldSeal)]), oldSeal)
	if err != nil {
		t.Fatalf("the old seal on the copy saved before the rotation: %v, want it to open (the limit this test documents)", err)
	}
	if !reflect.DeepEqual(old, current) || !reflect.DeepEqual(old.Files["ca.key"], bundle.Files["ca.key"]) {
		t.Errorf("the copy saved before holds %+v, the cluster's bundle %+v: want the same CA keys", old, current)
	}
}
