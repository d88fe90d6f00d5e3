package cli

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/secretsenc"
	"k1m.dev/k1m/pkg/serverbundle"
)

// A rotation on a cluster of two servers, through the records the servers
// keep: prepare makes the first key, then a new one; rotate is refused
// (writing nothing) until both servers record that they read with the new
// key, then makes it the write key. The sealed set opens with the CA key.
func TestPrepareRotateOnTheCluster(t *testing.T) {
	ctx := context.Background()
	caKey := []byte("the cluster CA's key")
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: join.ServerBootstrapName, Namespace: "kube-system"},
		Data: map[string]string{"server.s1": "https://[fddf::1]:6443", "server.s2": "https://[fddf::2]:6443"}})
	prepare := func(set secretsenc.KeySet, _ join.SecretsKeysState) (secretsenc.KeySet, error) {
		return secretsenc.PrepareKey(set)
	}
	first, err := changeClusterKeys(ctx, client, caKey, prepare)
	if err != nil || len(first.Keys) != 1 || first.Write != first.Keys[0].Name {
		t.Fatalf("prepare on no keys: %+v, %v", first, err)
	}
	// Both servers restart and record what they run with.
	record := func(node string, set secretsenc.KeySet) {
		t.Helper()
		err := join.UpdateSecretsKeys(ctx, client, node, func([]byte) ([]byte, join.AppliedKeys, error) {
			return nil, join.AppliedKeys{Keys: set.Names(), Write: set.Write}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	record("s1", first)
	record("s2", first)
	if _, err := changeClusterKeys(ctx, client, caKey, rotateWhenEveryServerReads); !errors.Is(err, secretsenc.ErrNoKeyPrepared) {
		t.Errorf("rotate with nothing prepared: %v", err)
	}
	prepared, err := changeClusterKeys(ctx, client, caKey, prepare)
	if err != nil {
		t.Fatal(err)
	}
	record("s1", prepared)
	before := sealedKeys(ctx, t, client)
	_, err = changeClusterKeys(ctx, client, caKey, rotateWhenEveryServerReads)
	want := "the prepared key " + prepared.Keys[0].Name + " is not read by server s2 yet: restart each, then rotate (k1m secrets-encrypt status shows each server's keys)"
	if err == nil || err.Error() != want {
		t.Fatalf("rotate before s2 restarted: %v, want %s", err, want)
	}
	if after := sealedKeys(ctx, t, client); !bytes.Equal(before, after) {
		t.Error("a refused rotate changed the cluster's keys")
	}
	record("s2", prepared)
	rotated, err := changeClusterKeys(ctx, client, caKey, rotateWhenEveryServerReads)
	if wantSet := (secretsenc.KeySet{Keys: prepared.Keys, Write: prepared.Keys[0].Name}); err != nil || !reflect.DeepEqual(rotated, wantSet) {
		t.Fatalf("rotate: %+v, %v; want %+v", rotated, err, wantSet)
	}
	got, err := serverbundle.OpenKeys(sealedKeys(ctx, t, client), caKey)
	if err != nil || !reflect.DeepEqual(got, rotated) {
		t.Errorf("the cluster's sealed set opens to %+v, %v; want %+v", got, err, rotated)
	}
	var out bytes.Buffer
	if err := clusterStatus(ctx, client, caKey, &out); err != nil {
		t.Fatal(err)
	}
	oldName, newName := prepared.Keys[1].Name, prepared.Keys[0].Name
	wantOut := "key " + newName + ": writes\nkey " + oldName + ": reads\n" +
		"SERVER  ENCRYPTS  WRITE KEY             KEYS\n" +
		"s1      false     " + oldName + "  " + newName + "," + oldName + "\n" +
		"s2      false     " + oldName + "  " + newName + "," + oldName + "\n"
	if out.String() != wantOut {
		t.Errorf("status:\n%s\nwant\n%s", out.String(), wantOut)
	}
}

func sealedKeys(ctx context.Context, t *testing.T, client *fake.Clientset) []byte {
	t.Helper()
	st, err := join.ReadSecretsKeys(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sealed
}
