// Package bootstrap carries what every server of a cluster must share (the
// CAs with their keys, the service-account signing key, the
// secrets-encryption key) from the servers of a cluster to a joining one,
// as k3s does: sealed with a key derived from the server join token and
// kept in the datastore (a ConfigMap, package join reads and writes it), so
// that no directory is copied by hand and the bundle is worth nothing
// without the token.
package bootstrap

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/fsutil"
)

// SharedFiles are the files of DATA-DIR/tls every server of a cluster holds
// the same copy of: the four CAs with their keys, the service-account
// key pair (every server signs and checks the same tokens), and the
// secrets-encryption key when Secrets are encrypted. Each server issues its
// own leaf certificates from these CAs.
var SharedFiles = []string{
	"ca.crt", "ca.key",
	"etcd-ca.crt", "etcd-ca.key",
	"front-proxy-ca.crt", "front-proxy-ca.key",
	constants.KubeletServingCA + ".crt", constants.KubeletServingCA + ".key",
	"service-account.key", "service-account.key.pub",
}

// SecretsEncryptionKeyFile is shared when the cluster encrypts Secrets.
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
	names := SharedFiles
	if secretsEncryption {
		names = append(append([]string{}, SharedFiles...), SecretsEncryptionKeyFile)
	}
	b := Bundle{Files: map[string][]byte{}, SecretsEncryption: secretsEncryption}
	for _, name := range names {
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
			return fmt.Errorf("the cluster's bootstrap data lacks %s", name)
		}
	}
	if b.SecretsEncryption && len(b.Files[SecretsEncryptionKeyFile]) == 0 {
		return fmt.Errorf("the cluster's bootstrap data lacks %s", SecretsEncryptionKeyFile)
	}
	for name := range b.Files {
		if !allowed[name] {
			return fmt.Errorf("the cluster's bootstrap data holds an unexpected file %q", name)
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

// sealed is a Bundle encrypted with AES-256-GCM under a key derived from
// the token secret (PBKDF2-SHA256, a random salt per sealing).
type sealed struct {
	Version int    `json:"version"`
	Salt    []byte `json:"salt"`
	Nonce   []byte `json:"nonce"`
	Data    []byte `json:"data"`
}

const (
	sealVersion = 1
	// kdfIterations makes each guess of a token secret cost a few
	// milliseconds; the secret itself has about 83 bits.
	kdfIterations = 200_000
)

// ErrWrongToken says the token does not open the bundle.
var ErrWrongToken = errors.New("the token does not decrypt the cluster's server bootstrap data")

// Seal encrypts b for the holders of tokenSecret. tokenID is bound into
// the ciphertext, so that an entry cannot be moved under another token.
func Seal(b Bundle, tokenID, tokenSecret string) ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	plain, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	s := sealed{Version: sealVersion, Salt: make([]byte, 16)}
	if _, err := rand.Read(s.Salt); err != nil {
		return nil, err
	}
	aead, err := newAEAD(tokenSecret, s.Salt)
	if err != nil {
		return nil, err
	}
	s.Nonce = make([]byte, aead.NonceSize())
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, err
	}
	s.Data = aead.Seal(nil, s.Nonce, plain, additionalData(tokenID))
	return json.Marshal(s)
}

// Open decrypts what Seal made for tokenID with tokenSecret.
func Open(data []byte, tokenID, tokenSecret string) (Bundle, error) {
	var s sealed
	if err := json.Unmarshal(data, &s); err != nil || s.Version != sealVersion {
		return Bundle{}, fmt.Errorf("the cluster's server bootstrap data is not k1m's sealed form (version %d)", sealVersion)
	}
	aead, err := newAEAD(tokenSecret, s.Salt)
	if err != nil {
		return Bundle{}, err
	}
	if len(s.Nonce) != aead.NonceSize() {
		return Bundle{}, fmt.Errorf("the cluster's server bootstrap data has a %d-byte nonce, want %d", len(s.Nonce), aead.NonceSize())
	}
	plain, err := aead.Open(nil, s.Nonce, s.Data, additionalData(tokenID))
	if err != nil {
		return Bundle{}, ErrWrongToken
	}
	var b Bundle
	if err := json.Unmarshal(plain, &b); err != nil {
		return Bundle{}, fmt.Errorf("the cluster's server bootstrap data: %w", err)
	}
	return b, b.check()
}

func newAEAD(tokenSecret string, salt []byte) (cipher.AEAD, error) {
	key, err := pbkdf2.Key(sha256.New, tokenSecret, salt, kdfIterations, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func additionalData(tokenID string) []byte { return []byte("k1m server bootstrap v1 " + tokenID) }
