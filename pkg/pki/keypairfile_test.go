package pki

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A renewed pair is read at the next Get; a pair caught half written
// leaves the one read before in use.
func TestKeyPairFileFollowsRenewal(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf := Leaf{Name: "leaf", CommonName: "one", Client: true}
	certFile, keyFile, err := ca.LoadOrIssue(dir, leaf)
	if err != nil {
		t.Fatal(err)
	}
	k := &KeyPairFile{CertFile: certFile, KeyFile: keyFile}
	first, err := k.Get()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := k.Get(); again != first {
		t.Error("an unchanged file was read again")
	}
	// Renewed: another certificate in the same files, a later mtime.
	if err := ca.issue(certFile, keyFile, Leaf{Name: "leaf", CommonName: "two", Client: true}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	os.Chtimes(certFile, later, later)
	renewed, err := k.Get()
	if err != nil {
		t.Fatalf("after the renewal: %v", err)
	}
	if renewed == first {
		t.Error("the renewed pair was not read")
	}
	// Half written: the key of another pair.
	other := filepath.Join(dir, "other.key")
	if err := ca.issue(filepath.Join(dir, "other.crt"), other, Leaf{Name: "other", CommonName: "x", Client: true}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(other)
	os.WriteFile(keyFile, data, 0o600)
	evenLater := later.Add(time.Minute)
	os.Chtimes(certFile, evenLater, evenLater)
	if got, err := k.Get(); got != renewed || err != nil {
		t.Errorf("a mismatched pair: %v, %v; want the renewed pair kept", got, err)
	}
	// Gone: an error.
	os.Remove(certFile)
	if _, err := k.Get(); err == nil {
		t.Error("a missing certificate file: no error")
	}
}
