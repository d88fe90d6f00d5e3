package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/pki"
)

// nearExpiry replaces dir/name.crt and .key with a certificate of the same
// subject that expires in left, signed by the CA caName.
func nearExpiry(t *testing.T, dir, name, caName string, left time.Duration) {
	t.Helper()
	ca, err := pki.LoadCA(dir, caName)
	if err != nil {
		t.Fatal(err)
	}
	old := parseCertFile(t, filepath.Join(dir, name+".crt"))
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: old.Subject.CommonName, Organization: old.Subject.Organization},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(left), ExtKeyUsage: old.ExtKeyUsage,
		KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: old.DNSNames, IPAddresses: old.IPAddresses}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func TestRunningServerRenewsDueCertificates(t *testing.T) {
	dir := t.TempDir()
	if _, err := loadOrIssueCerts(dir, testNames); err != nil {
		t.Fatal(err)
	}
	nearExpiry(t, dir, "admin", "ca", 10*24*time.Hour+time.Hour)
	nearExpiry(t, dir, "etcd-server", "etcd-ca", 100*24*time.Hour) // not due yet
	var warned []string
	now := time.Now()
	if err := renewCertificates(dir, testNames, now, func(s string) { warned = append(warned, s) }); err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "certificate admin.crt renewed: it would have expired ") || !strings.Contains(warned[0], "(in 10 days)") {
		t.Fatalf("warnings %q, want one for admin.crt", warned)
	}
	if left := time.Until(parseCertFile(t, filepath.Join(dir, "admin.crt")).NotAfter); left < 360*24*time.Hour {
		t.Errorf("admin.crt renewed for %s only", left)
	}
	if got := parseCertFile(t, filepath.Join(dir, "etcd-server.crt")).SerialNumber; got.Cmp(big.NewInt(7)) != 0 {
		t.Error("etcd-server.crt, not due, was renewed")
	}
	// A CA within a year of its end is warned about at every check.
	warned = nil
	caEnd := parseCertFile(t, filepath.Join(dir, "ca.crt")).NotAfter
	renewCertificates(dir, testNames, caEnd.Add(-100*24*time.Hour), func(s string) { warned = append(warned, s) })
	var cas []string
	for _, w := range warned {
		cas = append(cas, strings.Fields(w)[1])
	}
	if want := []string{"ca.crt", "etcd-ca.crt", "front-proxy-ca.crt", "kubelet-serving-ca.crt"}; !reflect.DeepEqual(cas, want) {
		t.Errorf("CA warnings for %v, want %v: %q", cas, want, warned)
	}
}

func TestRotateReissuesLeavesNotCAs(t *testing.T) {
	dataDir := t.TempDir()
	dir := TLSDir(dataDir)
	if _, err := loadOrIssueCerts(dir, testNames); err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	serials := map[string]*big.Int{}
	for _, n := range []string{"apiserver", "etcd-server", "front-proxy-client", "admin"} {
		serials[n] = parseCertFile(t, filepath.Join(dir, n+".crt")).SerialNumber
	}
	var rotated []string
	if err := Rotate(dataDir, []string{"apiserver", "etcd-server"}, func(n string) { rotated = append(rotated, n) }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rotated, []string{"apiserver", "etcd-server"}) {
		t.Errorf("rotated %v", rotated)
	}
	for n, was := range serials {
		changed := parseCertFile(t, filepath.Join(dir, n+".crt")).SerialNumber.Cmp(was) != 0
		if want := n == "apiserver" || n == "etcd-server"; changed != want {
			t.Errorf("%s reissued: %v, want %v", n, changed, want)
		}
	}
	// The reissued pairs still fit where they are used (same names, own
	// CA): the next start keeps them.
	rotatedSerial := parseCertFile(t, filepath.Join(dir, "apiserver.crt")).SerialNumber
	if _, err := loadOrIssueCerts(dir, testNames); err != nil {
		t.Fatal(err)
	}
	if got := parseCertFile(t, filepath.Join(dir, "apiserver.crt")).SerialNumber; got.Cmp(rotatedSerial) != 0 {
		t.Error("apiserver reissued again by the next start: the rotated one did not fit")
	}
	if caAfter, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); string(caAfter) != string(caBefore) {
		t.Error("the CA changed")
	}
	err := Rotate(dataDir, []string{"ca"}, func(string) {})
	if err == nil || !strings.HasPrefix(err.Error(), `no leaf certificate "ca" in `+dir+": want one of admin, apiserver, ") {
		t.Errorf("rotating a CA: %v", err)
	}
	if err := Rotate(t.TempDir(), nil, func(string) {}); err == nil || !strings.Contains(err.Error(), "has a server run with this data directory?") {
		t.Errorf("rotate with no PKI: %v", err)
	}
}
