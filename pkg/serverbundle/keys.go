package serverbundle

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"errors"

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

// keysForm is the sealed key set's form.
var keysForm = sealedForm{what: "the cluster's Secrets encryption keys", plural: true, version: keysSealVersion, additional: []byte(keysAdditionalData), wrongKey: ErrWrongCA}

// SealKeys encrypts the key set for the holders of the cluster CA's key.
func SealKeys(set secretsenc.KeySet, caKeyPEM []byte) ([]byte, error) {
	if err := set.Check(); err != nil {
		return nil, err
	}
	return keysForm.seal(set, func() (cipher.AEAD, error) { return keysAEAD(caKeyPEM) })
}

// OpenKeys decrypts what SealKeys made with caKeyPEM.
func OpenKeys(data, caKeyPEM []byte) (secretsenc.KeySet, error) {
	var set secretsenc.KeySet
	if err := keysForm.open(data, func() (cipher.AEAD, error) { return keysAEAD(caKeyPEM) }, &set); err != nil {
		return secretsenc.KeySet{}, err
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
