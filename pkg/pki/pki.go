// Package pki creates and keeps a k1m cluster's certificates on disk: one
// cluster CA, leaf certificates it signs, and the service-account key. A
// restart reuses what exists: the CA is never regenerated, and a leaf
// certificate is reissued only when it no longer covers what it must (new
// SANs) or is close to expiry. Every file is written atomically.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k1m.dev/k1m/pkg/fsutil"
)

// Validity periods: the CA outlives every leaf it signs.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	renewBefore  = 90 * 24 * time.Hour
)

// Authority is a CA that signs k1m's certificates.
type Authority struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// LoadOrCreateCA loads dir/name.crt and dir/name.key, or creates both when
// neither exists. One without the other is refused, never papered over
// with a new CA: every client and node trusts the old certificate, and a
// new one would cut them all off silently.
func LoadOrCreateCA(dir, name, commonName string) (*Authority, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certExists, keyExists := exists(certPath), exists(keyPath)
	switch {
	case certExists && keyExists:
		cert, key, certPEM, err := loadPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("loading the CA %s: %w", certPath, err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("%s is not a CA certificate", certPath)
		}
		return &Authority{Cert: cert, Key: key, CertPEM: certPEM}, nil
	case certExists:
		return nil, fmt.Errorf("the CA certificate %s is there but its key %s is missing: restore the key from a backup (a new CA would cut off every client that trusts this one)", certPath, keyPath)
	case keyExists:
		return nil, fmt.Errorf("the CA key %s is there but its certificate %s is missing: restore the certificate from a backup (a new CA would cut off every client that trusts this one)", keyPath, certPath)
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePair(certPath, keyPath, certPEM, key); err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// Leaf describes a certificate the CA signs.
type Leaf struct {
	Name         string // file name without extension
	CommonName   string
	Organization []string
	Server       bool // serving certificate (ExtKeyUsageServerAuth)
	Client       bool // client certificate (ExtKeyUsageClientAuth)
	DNSNames     []string
	IPs          []net.IP
}

// LoadOrIssue returns the paths of dir/leaf.Name.crt and .key, issuing them
// when missing, signed by another CA, short of a SAN, or near expiry.
func (ca *Authority) LoadOrIssue(dir string, leaf Leaf) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, leaf.Name+".crt"), filepath.Join(dir, leaf.Name+".key")
	if cert, _, _, err := loadPair(certPath, keyPath); err == nil && ca.stillGood(cert, leaf) {
		return certPath, keyPath, nil
	}
	return certPath, keyPath, ca.issue(certPath, keyPath, leaf)
}

// issue writes a new key and a certificate for leaf, signed by ca.
func (ca *Authority) issue(certPath, keyPath string, leaf Leaf) error {
	certPEM, key, err := ca.sign(leaf)
	if err != nil {
		return err
	}
	return writePair(certPath, keyPath, certPEM, key)
}

// Issue returns a new certificate for leaf, signed by ca, and its new key,
// both PEM, for a file that holds them together (as the kubelet keeps its
// client certificate).
func (ca *Authority) Issue(leaf Leaf) (certPEM, keyPEM []byte, err error) {
	certPEM, key, err := ca.sign(leaf)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	return certPEM, keyPEM, err
}

func (ca *Authority) sign(leaf Leaf) ([]byte, crypto.Signer, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: leaf.CommonName, Organization: leaf.Organization},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     leaf.DNSNames,
		IPAddresses:  leaf.IPs,
	}
	if leaf.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if leaf.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key, nil
}

// stillGood tells whether an existing certificate can be kept.
func (ca *Authority) stillGood(cert *x509.Certificate, leaf Leaf) bool {
	if cert.CheckSignatureFrom(ca.Cert) != nil || time.Until(cert.NotAfter) < renewBefore {
		return false
	}
	if cert.Subject.CommonName != leaf.CommonName || !slices.Equal(cert.Subject.Organization, leaf.Organization) {
		return false
	}
	for _, name := range leaf.DNSNames {
		if !slices.Contains(cert.DNSNames, name) {
			return false
		}
	}
	for _, ip := range leaf.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// LoadOrCreateKey keeps a bare signing key (the service-account key) at
// path, with its public half at path.pub. A missing public half is derived
// again from the key; a missing or unreadable key is refused when its
// public half exists (every service-account token was signed with it).
func LoadOrCreateKey(path string) (keyPath, pubPath string, err error) {
	pubPath = path + ".pub"
	var key crypto.Signer
	switch {
	case exists(path):
		if key, err = readKey(path); err != nil {
			return "", "", fmt.Errorf("the signing key %s: %w: restore it from a backup", path, err)
		}
		if exists(pubPath) {
			return path, pubPath, nil
		}
	case exists(pubPath):
		return "", "", fmt.Errorf("the public key %s is there but its signing key %s is missing: restore the key from a backup (a new one would invalidate every token signed with it)", pubPath, path)
	default:
		if key, err = newKey(); err != nil {
			return "", "", err
		}
		keyPEM, err := encodeKey(key)
		if err != nil {
			return "", "", err
		}
		if err := fsutil.WriteFile(path, keyPEM, 0o600); err != nil {
			return "", "", err
		}
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", err
	}
	return path, pubPath, fsutil.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, []byte, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, nil, fmt.Errorf("%s holds no PEM certificate", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", certPath, err)
	}
	key, err := readKey(keyPath)
	if err != nil {
		return nil, nil, nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, nil, nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	return cert, key, certPEM, nil
}

func readKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM key", path)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", path)
	}
	return signer, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ad, err1 := x509.MarshalPKIXPublicKey(a)
	bd, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && bytes.Equal(ad, bd)
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func writePair(certPath, keyPath string, certPEM []byte, key crypto.Signer) error {
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	// Key first: a crash in between leaves a key without its certificate,
	// which the next start replaces, never a certificate without its key.
	if err := fsutil.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return fsutil.WriteFile(certPath, certPEM, 0o644)
}
