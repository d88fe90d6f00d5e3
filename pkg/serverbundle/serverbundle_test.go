package serverbundle

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k1m.dev/k1m/pkg/secretsenc"
)

func testBundle(secretsEncryption bool) Bundle {
	b := Bundle{Files: map[string][]byte{}, SecretsEncryption: secretsEncryption}
	for _, name := range SharedFiles {
		b.Files[name] = []byte("content of " + name)
	}
	if secretsEncryption {
		b.Files[SecretsEncryptionKeyFile] = []byte("key")
	}
	return b
}

const testSeal = "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"

func TestSealOpenRoundTrip(t *testing.T) {
	want := testBundle(true)
	data, err := Seal(want, testSeal)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(data, testSeal)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("opened %+v, want %+v", got, want)
	}
	if SealID(testSeal) == SealID(testSeal[1:]+"a") || len(SealID(testSeal)) != 16 {
		t.Errorf("seal IDs %s, %s", SealID(testSeal), SealID(testSeal[1:]+"a"))
	}
}

// An attacker who holds a join token, or reads everything the cluster
// stores (every token's secret is in a bootstrap-token Secret), has no
// seal: nothing they hold opens the bundle. No seal at all is refused
// before any decryption.
func TestOnlyTheSealOpens(t *testing.T) {
	data, err := Seal(testBundle(false), testSeal)
	if err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []string{testSeal[:51] + "b", "abcdef.0123456789abcdef", "k1mabc.0123456789abcdef"} {
		if _, err := Open(data, wrong); !errors.Is(err, ErrWrongToken) {
			t.Errorf("Open with %s: %v, want ErrWrongToken", wrong, err)
		}
	}
	if _, err := Open(data, ""); err == nil || err.Error() != "no seal: only a server token (DATA-DIR/server-token) opens the cluster's server bundle" {
		t.Errorf("Open without a seal: %v", err)
	}
	if _, err := Open([]byte(`{"version":1}`), testSeal); err == nil || err.Error() != "the cluster's server bundle is not k1m's sealed form (version 2)" {
		t.Errorf("Open of the old version: %v", err)
	}
}

func TestReadWriteAndChecks(t *testing.T) {
	src := t.TempDir()
	want := testBundle(false)
	if err := want.Write(src); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(src, "ca.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("ca.key: %v, mode %v, want 0600", err, info.Mode().Perm())
	}
	got, err := Read(src, false)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Read = %+v, %v; want %+v", got, err, want)
	}
	// The Secrets key travels apart now (keys.go); a bundle of an
	// earlier build that carries it is still written.
	if got, err := Read(src, true); err != nil || !reflect.DeepEqual(got, Bundle{Files: want.Files, SecretsEncryption: true}) {
		t.Errorf("Read with secrets encryption = %+v, %v; want the shared files alone", got, err)
	}
	legacy := t.TempDir()
	if err := testBundle(true).Write(legacy); err != nil {
		t.Errorf("Write of a bundle of an earlier build, with its Secrets key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(legacy, SecretsEncryptionKeyFile)); err != nil {
		t.Error(err)
	}

	missing := testBundle(false)
	delete(missing.Files, "etcd-ca.key")
	dst := t.TempDir()
	if err := missing.Write(dst); err == nil || err.Error() != "the cluster's server bundle lacks etcd-ca.key" {
		t.Errorf("Write of a bundle without etcd-ca.key: %v", err)
	}
	extra := testBundle(false)
	extra.Files["../escape"] = []byte("x")
	if err := extra.Write(dst); err == nil || err.Error() != `the cluster's server bundle holds an unexpected file "../escape"` {
		t.Errorf("Write of a bundle with ../escape: %v", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("a refused bundle wrote %d files", len(entries))
	}
}

func TestKeysOpenOnlyWithTheClusterCAKey(t *testing.T) {
	set := secretsenc.KeySet{Keys: []secretsenc.Key{{Name: "k1m-key-a", Secret: bytes.Repeat([]byte{1}, secretsenc.KeySize)}}, Write: "k1m-key-a"}
	caKey := []byte("-----BEGIN EC PRIVATE KEY-----\nthe cluster's\n-----END EC PRIVATE KEY-----\n")
	data, err := SealKeys(set, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, set.Keys[0].Secret) || bytes.Contains(data, []byte("k1m-key-a")) {
		t.Error("the sealed key set shows a key or its name")
	}
	got, err := OpenKeys(data, caKey)
	if err != nil || !reflect.DeepEqual(got, set) {
		t.Fatalf("OpenKeys = %+v, %v; want %+v", got, err, set)
	}
	// Another cluster's CA key, a seal, nothing: refused.
	for _, wrong := range [][]byte{[]byte("-----BEGIN EC PRIVATE KEY-----\nanother\n-----END EC PRIVATE KEY-----\n"), []byte(testSeal)} {
		if _, err := OpenKeys(data, wrong); !errors.Is(err, ErrWrongCA) {
			t.Errorf("OpenKeys with %q: %v, want ErrWrongCA", wrong, err)
		}
	}
	if _, err := OpenKeys(data, nil); err == nil || err.Error() != "no cluster CA key: only a server's DATA-DIR/tls/ca.key opens the cluster's Secrets encryption keys" {
		t.Errorf("OpenKeys without a CA key: %v", err)
	}
	// A bundle's sealed form is not a key set's.
	bundle, _ := Seal(testBundle(false), testSeal)
	if _, err := OpenKeys(bundle, caKey); err == nil || err.Error() != "the cluster's Secrets encryption keys are not k1m's sealed form (version 1)" {
		t.Errorf("OpenKeys of a sealed bundle: %v", err)
	}
}
