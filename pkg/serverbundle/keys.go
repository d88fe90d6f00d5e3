package serverbundle

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"k1m.dev/k1m/pkg/secretsenc"
)

// The cluster's Secrets encryption key set is sealed apart from the
// bundle, with a key hashed from the cluster CA's private key (ca.key,
// one of SharedFiles). Every server holds that file, and it never changes
// (k1m does not rotate CAs); only some servers hold the server token's
// seal (the others forget theirs when it is rotated on another server),
// yet every server must read the set at each start. Whoever holds ca.key
// can already issue an admin's certificate and read every Secret, so the
// set opens to no one the cluster did not already trust with its Secrets;
// not to a join token holder, a kube-system reader or an etcd snapshot's
// holder (the CA key is in none of them).

// keysSealVersion is the sealed key set's form.
const keysSealVersion = 1

// ErrWrongCA says the CA key does not open the sealed key set: it was
// sealed by the servers of another cluster.
var ErrWrongCA = errors.New("this server's cluster CA key (DATA-DIR/tls/ca.key) does not open the cluster's Secrets encryption keys")

// SealKeys encrypts the key set for the holders of the cluster CA's key.
func SealKeys(set secretsenc.KeySet, caKeyPEM []byte) ([]byte, error) {
	if err := set.Check(); err != nil {
		return nil, err
	}
	plain, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	aead, err := keysAEAD(caKeyPEM)
	if err != nil {
		return nil, err
	}
	s := sealed{Version: keysSealVersion, Nonce: make([]byte, aead.NonceSize())}
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, err
	}
	s.Data = aead.Seal(nil, s.Nonce, plain, []byte(keysAdditionalData))
	return json.Marshal(s)
}

// OpenKeys decrypts what SealKeys made with caKeyPEM.
func OpenKeys(data, caKeyPEM []byte) (secretsenc.KeySet, error) {
	var s sealed
	if err := json.Unmarshal(data, &s); err != nil || s.Version != keysSealVersion {
		return secretsenc.KeySet{}, fmt.Errorf("the cluster's Secrets encryption keys are not k1m's sealed form (version %d)", keysSealVersion)
	}
	aead, err := keysAEAD(caKeyPEM)
	if err != nil {
		return secretsenc.KeySet{}, err
	}
	if len(s.Nonce) != aead.NonceSize() {
		return secretsenc.KeySet{}, fmt.Errorf("the cluster's Secrets encryption keys have a %d-byte nonce, want %d", len(s.Nonce), aead.NonceSize())
	}
	plain, err := aead.Open(nil, s.Nonce, s.Data, []byte(keysAdditionalData))
	if err != nil {
		return secretsenc.KeySet{}, ErrWrongCA
	}
	var set secretsenc.KeySet
	if err := json.Unmarshal(plain, &set); err != nil {
		return secretsenc.KeySet{}, fmt.Errorf("the cluster's Secrets encryption keys: %w", err)
	}
	return set, set.Check()
}

// keysAdditionalData is part of the sealed form: never change it.
const keysAdditionalData = "k1m secrets-encryption keys v1"

func keysAEAD(caKeyPEM []byte) (cipher.AEAD, error) {
	if len(caKeyPEM) == 0 {
		return nil, errors.New("no cluster CA key: only a server's DATA-DIR/tls/ca.key opens the cluster's Secrets encryption keys")
	}
	key := sha256.Sum256(append([]byte("k1m secrets-encryption keys v1\x00"), caKeyPEM...))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
