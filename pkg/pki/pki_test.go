package pki

import (
	"bytes"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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

func TestHalfMissingCAIsRefusedNotRegenerated(t *testing.T) {
	for _, missing := range []string{"ca.key", "ca.crt"} {
		dir := t.TempDir()
		if _, err := LoadOrCreateCA(dir, "ca", "k1m-ca"); err != nil {
			t.Fatal(err)
		}
		kept, _ := os.ReadFile(filepath.Join(dir, map[string]string{"ca.key": "ca.crt", "ca.crt": "ca.key"}[missing]))
		os.Remove(filepath.Join(dir, missing))
		_, err := LoadOrCreateCA(dir, "ca", "k1m-ca")
		want := map[string]string{
			"ca.key": "the CA certificate " + filepath.Join(dir, "ca.crt") + " is there but its key " + filepath.Join(dir, "ca.key") + " is missing: restore the key from a backup (a new CA would cut off every client that trusts this one)",
			"ca.crt": "the CA key " + filepath.Join(dir, "ca.key") + " is there but its certificate " + filepath.Join(dir, "ca.crt") + " is missing: restore the certificate from a backup (a new CA would cut off every client that trusts this one)",
		}[missing]
		if err == nil || err.Error() != want {
			t.Errorf("%s missing: got %v, want %q", missing, err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, missing)); err == nil {
			t.Errorf("%s missing: it was made again", missing)
		}
		now, _ := os.ReadFile(filepath.Join(dir, map[string]string{"ca.key": "ca.crt", "ca.crt": "ca.key"}[missing]))
		if string(now) != string(kept) {
			t.Errorf("%s missing: the other half was rewritten", missing)
		}
	}
}

func TestServiceAccountKeyHalves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sa.key")
	_, pub, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(pub)
	os.Remove(pub)
	if _, _, err := LoadOrCreateKey(path); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(pub); string(after) != string(before) {
		t.Error("a missing public key was not derived again from the same private key")
	}
	os.Remove(path)
	_, _, err = LoadOrCreateKey(path)
	want := "the public key " + pub + " is there but its signing key " + path + " is missing: restore the key from a backup (a new one would invalidate every token signed with it)"
	if err == nil || err.Error() != want {
		t.Errorf("key missing: got %v, want %q", err, want)
	}
}

func TestReissueKeepsNamesAndUsages(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf := Leaf{Name: "apiserver", CommonName: "kube-apiserver", Organization: []string{"o"}, Server: true, Client: true,
		DNSNames: []string{"kubernetes", "localhost"}, IPs: []net.IP{net.IPv6loopback}}
	certPath, keyPath, err := ca.LoadOrIssue(dir, leaf)
	if err != nil {
		t.Fatal(err)
	}
	before := readCert(t, certPath)
	oldKey, _ := os.ReadFile(keyPath)
	if err := ca.Reissue(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	after, _, _, err := loadPair(certPath, keyPath)
	if err != nil {
		t.Fatalf("reissued pair: %v", err)
	}
	if newKey, _ := os.ReadFile(keyPath); bytes.Equal(newKey, oldKey) {
		t.Error("the key was not replaced")
	}
	if after.SerialNumber.Cmp(before.SerialNumber) == 0 || !after.NotAfter.After(before.NotAfter.Add(-time.Minute)) {
		t.Errorf("serial %v -> %v, NotAfter %v -> %v", before.SerialNumber, after.SerialNumber, before.NotAfter, after.NotAfter)
	}
	if !reflect.DeepEqual(after.Subject.String(), before.Subject.String()) || !reflect.DeepEqual(after.DNSNames, before.DNSNames) ||
		len(after.IPAddresses) != 1 || !after.IPAddresses[0].Equal(net.IPv6loopback) || !reflect.DeepEqual(after.ExtKeyUsage, before.ExtKeyUsage) {
		t.Errorf("reissued certificate differs: %v %v %v %v", after.Subject, after.DNSNames, after.IPAddresses, after.ExtKeyUsage)
	}
	if err := after.CheckSignatureFrom(ca.Cert); err != nil {
		t.Error(err)
	}
	other, _ := LoadOrCreateCA(t.TempDir(), "ca", "other")
	if err := other.Reissue(certPath, keyPath); err == nil {
		t.Error("a CA reissued a certificate it did not sign")
	}
	if err := ca.Reissue(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")); err == nil {
		t.Error("the CA certificate was reissued as a leaf")
	}
	info, err := Inspect(certPath)
	if err != nil || info.Subject != "kube-apiserver" || info.Issuer != "k1m-ca" || info.IsCA || !info.NotAfter.Equal(after.NotAfter) {
		t.Errorf("Inspect = %+v, %v", info, err)
	}
}
