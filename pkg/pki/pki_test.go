package pki

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	cert, _, _, err := loadPair(path, strings.TrimSuffix(path, ".crt")+".key")
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestCAIsKeptAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	ca1, err := LoadOrCreateCA(dir, "cluster-ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	ca2, err := LoadOrCreateCA(dir, "cluster-ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	if !ca1.Cert.Equal(ca2.Cert) {
		t.Fatal("a second start made a new CA; clients trusting the first would break")
	}
	info, _ := os.Stat(filepath.Join(dir, "cluster-ca.key"))
	if info.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode %v, want 0600", info.Mode().Perm())
	}
}

func TestLeafReusedUntilItNoLongerFits(t *testing.T) {
	dir := t.TempDir()
	ca, _ := LoadOrCreateCA(dir, "ca", "k1m-ca")
	leaf := Leaf{Name: "apiserver", CommonName: "kube-apiserver", Server: true,
		DNSNames: []string{"kubernetes"}, IPs: []net.IP{net.ParseIP("fddf:4035:b510::1")}}
	certPath, _, err := ca.LoadOrIssue(dir, leaf)
	if err != nil {
		t.Fatal(err)
	}
	first := readCert(t, certPath)
	if err := first.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatalf("leaf not signed by the CA: %v", err)
	}
	if first.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("serving certificate lacks server auth: %v", first.ExtKeyUsage)
	}
	ca.LoadOrIssue(dir, leaf)
	if !readCert(t, certPath).Equal(first) {
		t.Error("an unchanged leaf was reissued")
	}
	leaf.IPs = append(leaf.IPs, net.ParseIP("fddf:4035:b520::10"))
	ca.LoadOrIssue(dir, leaf)
	second := readCert(t, certPath)
	if second.Equal(first) || len(second.IPAddresses) != 2 {
		t.Errorf("a leaf missing a new SAN was kept: %v", second.IPAddresses)
	}
}

func TestMismatchedKeyIsRefused(t *testing.T) {
	dir := t.TempDir()
	ca, _ := LoadOrCreateCA(dir, "ca", "k1m-ca")
	ca.LoadOrIssue(dir, Leaf{Name: "a", CommonName: "a", Client: true})
	ca.LoadOrIssue(dir, Leaf{Name: "b", CommonName: "b", Client: true})
	other, _ := os.ReadFile(filepath.Join(dir, "b.key"))
	os.WriteFile(filepath.Join(dir, "a.key"), other, 0o600)
	if _, _, _, err := loadPair(filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched pair: %v", err)
	}
}

func TestServiceAccountKeyKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sa.key")
	k1, pub1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(pub1)
	LoadOrCreateKey(path)
	b, _ := os.ReadFile(pub1)
	if k1 != path || string(a) != string(b) {
		t.Error("service-account key changed across restarts")
	}
}
