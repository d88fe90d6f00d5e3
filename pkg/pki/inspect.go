package pki

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RenewBefore is how long before expiry k1m renews a leaf certificate it
// issued: at every server start and, while the server runs, at every
// certificate check. 90 days of a year's validity, as k3s renews.
const RenewBefore = renewBefore

// CertInfo is what `k1m certificate check` shows of a certificate file.
type CertInfo struct {
	Path      string
	Subject   string // common name
	Issuer    string // common name
	NotBefore time.Time
	NotAfter  time.Time
	IsCA      bool
}

// Inspect reads the first certificate of the PEM file at path.
func Inspect(path string) (CertInfo, error) {
	cert, err := ReadCertFile(path)
	if err != nil {
		return CertInfo{}, err
	}
	return CertInfo{Path: path, Subject: cert.Subject.CommonName, Issuer: cert.Issuer.CommonName,
		NotBefore: cert.NotBefore, NotAfter: cert.NotAfter, IsCA: cert.IsCA}, nil
}

// ReadCertFile reads the first certificate of the PEM file at path (a
// kubelet's -current.pem holds its key too).
func ReadCertFile(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%s holds no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return cert, nil
		}
	}
}

// Reissue replaces the leaf certificate at certPath, and its key at
// keyPath, with a new key and a certificate of full validity for the same
// subject, names and usages, signed by ca. A certificate ca did not sign
// is refused.
func (ca *Authority) Reissue(certPath, keyPath string) error {
	old, err := ReadCertFile(certPath)
	if err != nil {
		return err
	}
	if old.IsCA {
		return fmt.Errorf("%s is a CA certificate: k1m reissues leaf certificates only", certPath)
	}
	if err := old.CheckSignatureFrom(ca.Cert); err != nil {
		return fmt.Errorf("%s is not signed by %s: %w", certPath, ca.Cert.Subject.CommonName, err)
	}
	leaf := Leaf{Name: "", CommonName: old.Subject.CommonName, Organization: old.Subject.Organization,
		DNSNames: old.DNSNames, IPs: old.IPAddresses}
	for _, u := range old.ExtKeyUsage {
		leaf.Server = leaf.Server || u == x509.ExtKeyUsageServerAuth
		leaf.Client = leaf.Client || u == x509.ExtKeyUsageClientAuth
	}
	return ca.issue(certPath, keyPath, leaf)
}

// LoadCA loads the CA dir/name.crt and .key; unlike LoadOrCreateCA it
// never creates one.
func LoadCA(dir, name string) (*Authority, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if !exists(certPath) && !exists(keyPath) {
		return nil, fmt.Errorf("no CA %s in %s (has a server run with this data directory?)", name, dir)
	}
	return LoadOrCreateCA(dir, name, "")
}
