// Package serverbundle carries what every server of a cluster must share (the
// CAs with their keys, the service-account signing key) from the servers
// of a cluster to a joining one,
// as k3s does: sealed with the seal of the server token (never stored in
// the cluster) and kept in the datastore (a ConfigMap, package join reads
// and writes it), so that no directory is copied by hand and the bundle is
// worth nothing without the server token: not to a join token holder, not
// to a reader of the cluster's Secrets, not to an etcd snapshot's holder.
package serverbundle

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/fsutil"
)

// SharedFiles are the files of DATA-DIR/tls every server of a cluster holds
// the same copy of: the four CAs with their keys and the service-account
// key pair (every server signs and checks the same tokens). Each server
// issues its own leaf certificates from these CAs. The Secrets encryption
// keys are shared apart, sealed with the cluster CA's key (keys.go): every
// server holds that key, while only some hold the server token's seal.
var SharedFiles = []string{
	"ca.crt", "ca.key",
	"etcd-ca.crt", "etcd-ca.key",
	"front-proxy-ca.crt", "front-proxy-ca.key",
	constants.KubeletServingCA + ".crt", constants.KubeletServingCA + ".key",
	"service-account.key", "service-account.key.pub",
}

// SecretsEncryptionKeyFile is the one Secrets key of builds before key
// sets. Their bundles carry it when the cluster encrypts Secrets; a server
// joining with such a bundle writes it, and then adopts it into the
// cluster's key set. Bundles sealed now leave it out.
const SecretsEncryptionKeyFile = "secrets-encryption.key"

// Bundle is what a joining server receives.
type Bundle struct {
	// Files maps a file name in DATA-DIR/tls to its content.
	Files map[string][]byte `json:"files"`
	// SecretsEncryption tells whether the cluster encrypts Secrets at rest
	// (a setting every server must share: a server without the key could
	// not read them).
	SecretsEncryption bool `json:"secretsEncryption"`
}

// Read collects the shared files of tlsDir.
func Read(tlsDir string, secretsEncryption bool) (Bundle, error) {
	b := Bundle{Files: map[string][]byte{}, SecretsEncryption: secretsEncryption}
	for _, name := range SharedFiles {
		data, err := os.ReadFile(filepath.Join(tlsDir, name))
		if err != nil {
			return Bundle{}, fmt.Errorf("reading the cluster's shared files: %w", err)
		}
		b.Files[name] = data
	}
	return b, nil
}

// Write puts the bundle's files into tlsDir (keys mode 0600). It refuses a
// bundle missing a shared file, and a file name that is not one of them,
// before writing anything.
func (b Bundle) Write(tlsDir string) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return err
	}
	for _, name := range b.names() {
		mode := os.FileMode(0o600)
		if filepath.Ext(name) == ".crt" || filepath.Ext(name) == ".pub" {
			mode = 0o644
		}
		if err := fsutil.WriteFile(filepath.Join(tlsDir, name), b.Files[name], mode); err != nil {
			return err
		}
	}
	return nil
}

func (b Bundle) check() error {
	allowed := map[string]bool{SecretsEncryptionKeyFile: b.SecretsEncryption}
	for _, name := range SharedFiles {
		allowed[name] = true
		if len(b.Files[name]) == 0 {
			return fmt.Errorf("the cluster's server bundle lacks %s", name)
		}
	}
	for name := range b.Files {
		if !allowed[name] {
			return fmt.Errorf("the cluster's server bundle holds an unexpected file %q", name)
		}
	}
	return nil
}

func (b Bundle) names() []string {
	names := make([]string, 0, len(b.Files))
	for name := range b.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// sealVersion 2: sealed with the server token's seal. Version 1 was sealed
// with the join token's secret, which the cluster stores (its
// bootstrap-token Secret): whoever read kube-system's Secrets could open
// it. Servers delete version 1 entries (package join).
const sealVersion = 2

// ErrWrongToken says the token does not open the bundle.
var ErrWrongToken = errors.New("the token does not decrypt the cluster's server bundle")

// SealID names a seal without revealing it: the key the sealed bundle is
// published under.
func SealID(seal string) string {
	sum := sha256.Sum256([]byte("k1m seal id\x00" + seal))
	return hex.EncodeToString(sum[:8])
}

// bundleForm is the sealed bundle's form, bound to its seal's ID, so
// that an entry cannot be moved under another ID.
func bundleForm(seal string) sealedForm {
	return sealedForm{what: "the cluster's server bundle", version: sealVersion, additional: additionalData(seal), wrongKey: ErrWrongToken}
}

// Seal encrypts b for the holders of seal; the seal's ID is bound into the
// ciphertext, so that an entry cannot be moved under another ID.
func Seal(b Bundle, seal string) ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	return bundleForm(seal).seal(b, func() (cipher.AEAD, error) { return newAEAD(seal) })
}

// Open decrypts what Seal made with seal.
func Open(data []byte, seal string) (Bundle, error) {
	var b Bundle
	if err := bundleForm(seal).open(data, func() (cipher.AEAD, error) { return newAEAD(seal) }, &b); err != nil {
		return Bundle{}, err
	}
	return b, b.check()
}

// newAEAD keys AES-256-GCM with the seal: 256 random bits already, so a
// hash (not a slow key derivation) makes the key.
func newAEAD(seal string) (cipher.AEAD, error) {
	if seal == "" {
		return nil, errors.New("no seal: only a server token (DATA-DIR/server-token) opens the cluster's server bundle")
	}
	key := sha256.Sum256([]byte("k1m seal key v2\x00" + seal))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// additionalData binds a sealed bundle to its seal. The words are part of
// the sealed form (bundles sealed by earlier releases carry them): never
// change them.
func additionalData(seal string) []byte { return []byte("k1m server bootstrap v2 " + SealID(seal)) }
