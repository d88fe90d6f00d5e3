package bootstrap

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
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

func TestSealOpenRoundTrip(t *testing.T) {
	want := testBundle(true)
	data, err := Seal(want, "abcdef", "abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(data, "abcdef", "abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("opened %+v, want %+v", got, want)
	}
}

// An attacker with another token (an agent's, from k1m token create) reads
// the sealed entry through RBAC but cannot open it, nor move it under
// their own token ID.
func TestWrongTokenIsRefused(t *testing.T) {
	data, err := Seal(testBundle(false), "abcdef", "abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, secret string }{
		{"abcdef", "abcdef.0123456789abcdeg"}, // wrong secret
		{"zzzzzz", "abcdef.0123456789abcdef"}, // right secret, entry moved under another ID
		{"agent1", "agent1.aaaaaaaaaaaaaaaa"}, // another token entirely
	} {
		if _, err := Open(data, c.id, c.secret); !errors.Is(err, ErrWrongToken) {
			t.Errorf("Open with %s: %v, want ErrWrongToken", c.id, err)
		}
	}
	if _, err := Open([]byte(`{"version":2}`), "abcdef", "abcdef.0123456789abcdef"); err == nil || err.Error() != "the cluster's server bootstrap data is not k1m's sealed form (version 1)" {
		t.Errorf("Open of another version: %v", err)
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
	if _, err := Read(src, true); err == nil {
		t.Error("Read with secrets encryption and no key file: no error")
	}

	missing := testBundle(false)
	delete(missing.Files, "etcd-ca.key")
	dst := t.TempDir()
	if err := missing.Write(dst); err == nil || err.Error() != "the cluster's bootstrap data lacks etcd-ca.key" {
		t.Errorf("Write of a bundle without etcd-ca.key: %v", err)
	}
	extra := testBundle(false)
	extra.Files["../escape"] = []byte("x")
	if err := extra.Write(dst); err == nil || err.Error() != `the cluster's bootstrap data holds an unexpected file "../escape"` {
		t.Errorf("Write of a bundle with ../escape: %v", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("a refused bundle wrote %d files", len(entries))
	}
}
