package nodename

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k1m.dev/k1m/pkg/pki"
)

// The check writes nothing; a record names the directory's node; another
// name is a Mismatch naming both.
func TestRecordAndCheck(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "none.pem")
	if err := Check(dir, cert, "vm"); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check wrote %v: only a start that passed its checks records the name", entries)
	}
	if err := Record(dir, "vm"); err != nil {
		t.Fatal(err)
	}
	if err := Record(dir, "other"); err != nil {
		t.Fatal(err)
	}
	if got, err := Recorded(dir, cert); got != "vm" || err != nil {
		t.Errorf("Recorded after a second Record: %q, %v; want the first name, vm", got, err)
	}
	if err := Check(dir, cert, "vm"); err != nil {
		t.Errorf("restart: %v", err)
	}
	var m *Mismatch
	err := Check(dir, cert, "k1m-server-1")
	if !errors.As(err, &m) || !reflect.DeepEqual(*m, Mismatch{DataDir: dir, Recorded: "vm", Wanted: "k1m-server-1"}) {
		t.Fatalf("another name: %#v", err)
	}
	if want := "node name k1m-server-1: the data directory " + dir + " was made for node vm"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}

// Data from before the record is known by its kubelet's client
// certificate.
func TestRecordedFromTheClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.LoadOrIssue(t.TempDir(), pki.Leaf{Name: "node", CommonName: "system:node:vm", Organization: []string{"system:nodes"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := os.ReadFile(cert)
	k, _ := os.ReadFile(key)
	current := filepath.Join(dir, "kubelet-client-current.pem")
	if err := os.WriteFile(current, append(c, k...), 0o600); err != nil {
		t.Fatal(err)
	}
	var m *Mismatch
	err = Check(dir, current, "k1m-server-1")
	if !errors.As(err, &m) || !reflect.DeepEqual(*m, Mismatch{DataDir: dir, Recorded: "vm", Wanted: "k1m-server-1"}) {
		t.Errorf("a data directory from before the record: %#v", err)
	}
}
