package server

import (
	"crypto"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/pki"
)

var testNames = servingNames{
	IPs:      []net.IP{net.ParseIP("fddf:4035:b520::1"), net.IPv6loopback, net.ParseIP("fddf:4035:b510::1")},
	DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "server-0"},
}

func parseCertFile(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	cert, err := pki.ReadCertFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// Each leaf chains to its own domain's CA and to no other: a certificate
// the CSR API signs (cluster CA) must not open an etcd.
func TestEachLeafIsSignedByItsDomainsCAOnly(t *testing.T) {
	c, err := loadOrIssueCerts(t.TempDir(), testNames)
	if err != nil {
		t.Fatal(err)
	}
	cas := map[string]*x509.Certificate{"cluster": c.cluster.Cert, "etcd": c.etcd.Cert, "front-proxy": c.frontProxy.Cert, "kubelet-serving": c.kubeletServing.Cert}
	want := map[string]string{
		"apiserver": "cluster", "apiserver-kubelet-client": "cluster", "admin": "cluster", "super-admin": "cluster", "controller-manager": "cluster", "scheduler": "cluster",
		"etcd-server": "etcd", "apiserver-etcd-client": "etcd", "front-proxy-client": "front-proxy",
	}
	for name, domain := range want {
		leaf := parseCertFile(t, filepath.Join(c.dir, name+".crt"))
		for d, ca := range cas {
			err := leaf.CheckSignatureFrom(ca)
			if d == domain && err != nil {
				t.Errorf("%s is not signed by the %s CA: %v", name, d, err)
			}
			if d != domain && err == nil {
				t.Errorf("%s is signed by the %s CA, want only the %s CA", name, d, domain)
			}
		}
	}
	if len(c.leaves(testNames)) != len(want) {
		t.Errorf("%d leaves, the test knows %d: add the new one above", len(c.leaves(testNames)), len(want))
	}
	for a, ca := range cas {
		for b, other := range cas {
			if a < b && (ca.Equal(other) || ca.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(other.PublicKey)) {
				t.Errorf("the %s and %s trust domains share a CA or its key", a, b)
			}
		}
	}
}

func TestAPIServerCertificateNamesEveryAddress(t *testing.T) {
	c, err := loadOrIssueCerts(t.TempDir(), testNames)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCertFile(t, c.apiserver.cert)
	if !slices.Equal(cert.DNSNames, testNames.DNSNames) {
		t.Errorf("DNS SANs %v, want %v", cert.DNSNames, testNames.DNSNames)
	}
	if !slices.EqualFunc(cert.IPAddresses, testNames.IPs, net.IP.Equal) {
		t.Errorf("IP SANs %v, want %v", cert.IPAddresses, testNames.IPs)
	}
	if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("key usage %v, want server auth only", cert.ExtKeyUsage)
	}
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	got := map[string]string{}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		got[filepath.Base(f)] = string(data)
	}
	return got
}

func TestRestartReusesEveryFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := loadOrIssueCerts(dir, testNames); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	if _, err := loadOrIssueCerts(dir, testNames); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, dir)
	for name, data := range before {
		if after[name] != data {
			t.Errorf("%s changed on restart", name)
		}
	}
	if len(after) != len(before) {
		t.Errorf("restart made new files: %d before, %d after", len(before), len(after))
	}
	// A new address (say the node IP changed) reissues the serving
	// certificates only: kube-apiserver's and the etcds' (other servers
	// reach those on the host's addresses).
	more := testNames
	more.IPs = append(append([]net.IP{}, testNames.IPs...), net.ParseIP("fddf:4035:b520::99"))
	if _, err := loadOrIssueCerts(dir, more); err != nil {
		t.Fatal(err)
	}
	for name, data := range snapshot(t, dir) {
		changed := before[name] != data
		serving := name == "apiserver.crt" || name == "apiserver.key" || name == "etcd-server.crt" || name == "etcd-server.key"
		if changed != serving {
			t.Errorf("%s changed=%v after a new SAN", name, changed)
		}
	}
}

// A data directory from before the split: one ca.crt signed everything.
// The cluster CA and its leaves stay (nodes trust it); the etcd and
// front-proxy leaves move to their new CAs.
func TestOldSingleCADataDirIsMigrated(t *testing.T) {
	dir := t.TempDir()
	old, err := pki.LoadOrCreateCA(dir, "ca", "k1m-ca")
	if err != nil {
		t.Fatal(err)
	}
	oldCerts := &certs{cluster: authority{Authority: old}, etcd: authority{Authority: old}, frontProxy: authority{Authority: old}}
	for _, l := range oldCerts.leaves(testNames) {
		if _, _, err := old.LoadOrIssue(dir, l.leaf); err != nil {
			t.Fatal(err)
		}
	}
	pki.LoadOrCreateKey(filepath.Join(dir, "service-account.key"))
	before := snapshot(t, dir)
	c, err := loadOrIssueCerts(dir, testNames)
	if err != nil {
		t.Fatal(err)
	}
	if !c.cluster.Cert.Equal(old.Cert) {
		t.Fatal("the cluster CA was replaced: every joined node would lose trust")
	}
	reissued := map[string]bool{"etcd-server": true, "apiserver-etcd-client": true, "front-proxy-client": true}
	for name, data := range snapshot(t, dir) {
		base := name[:len(name)-len(filepath.Ext(name))]
		if before[name] == "" {
			if base != "etcd-ca" && base != "front-proxy-ca" && base != constants.KubeletServingCA {
				t.Errorf("migration made an unexpected file %s", name)
			}
			continue
		}
		if changed := before[name] != data; changed != reissued[base] {
			t.Errorf("%s changed=%v, want %v", name, changed, reissued[base])
		}
	}
}
