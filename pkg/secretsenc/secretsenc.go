// Package secretsenc keeps the key that encrypts Secrets at rest (k1m
// server --secrets-encryption) and the EncryptionConfiguration that hands
// it to kube-apiserver. The key is 32 random bytes (AES-256, aescbc as
// k3s uses), base64 in a file of mode 0600 under the data directory.
package secretsenc

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"k1m.dev/k1m/pkg/fsutil"
)

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

// KeyName is the name of the key in the EncryptionConfiguration; it is
// part of every encrypted value's prefix (k8s:enc:aescbc:v1:KeyName:).
const KeyName = "k1m-key-1"

// LoadOrCreateKey reads the key at path, or makes one when the file does
// not exist. A key file readable by others, or of the wrong size, is
// refused with what to fix: it is never replaced, since the Secrets
// already written can be read only with it.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, fsutil.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600)
}

// CheckKey checks an existing key file without changing anything; an
// error wrapping os.ErrNotExist means there is none.
func CheckKey(path string) error {
	_, err := readKey(path)
	return err
}

func readKey(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the Secrets encryption key %s has mode %#o: want 0600, readable by root alone (chmod 600 %s)", path, perm, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("the Secrets encryption key %s is not base64: want %d random bytes, base64-encoded", path, KeySize)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("the Secrets encryption key %s holds %d bytes: want %d (AES-256), base64-encoded", path, len(key), KeySize)
	}
	return key, nil
}

// Config is kube-apiserver's EncryptionConfiguration for Secrets. With
// encrypt on, new writes are encrypted and plaintext ones from before are
// still read; with it off (the key kept from an earlier run), new writes
// are plaintext and encrypted ones are still read.
func Config(key []byte, encrypt bool) ([]byte, error) {
	aescbc := apiserverv1.ProviderConfiguration{AESCBC: &apiserverv1.AESConfiguration{
		Keys: []apiserverv1.Key{{Name: KeyName, Secret: base64.StdEncoding.EncodeToString(key)}},
	}}
	identity := apiserverv1.ProviderConfiguration{Identity: &apiserverv1.IdentityConfiguration{}}
	providers := []apiserverv1.ProviderConfiguration{aescbc, identity}
	if !encrypt {
		providers = []apiserverv1.ProviderConfiguration{identity, aescbc}
	}
	cfg := apiserverv1.EncryptionConfiguration{
		Resources: []apiserverv1.ResourceConfiguration{{Resources: []string{"secrets"}, Providers: providers}},
	}
	cfg.APIVersion, cfg.Kind = apiserverv1.SchemeGroupVersion.String(), "EncryptionConfiguration"
	return yaml.Marshal(cfg)
}

// Prefix starts every Secret value encrypted with the key, in etcd.
const Prefix = "k8s:enc:aescbc:v1:" + KeyName + ":"
