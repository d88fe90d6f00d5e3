// Package secretsenc keeps the keys that encrypt Secrets at rest (k1m
// server --secrets-encryption) and the EncryptionConfiguration that hands
// them to kube-apiserver. A key is 32 random bytes (AES-256, aescbc as k3s
// uses); a server keeps its key set (keyset.go) in a file of mode 0600
// under the data directory, and on several servers the set is one
// cluster-wide value that every server adopts at start. Builds before key
// sets kept one key, base64, in secrets-encryption.key: it is read as a
// set of that one key.
package secretsenc

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

// KeyName is the name of the one key of builds before key sets; it is
// part of every value it encrypted's prefix (k8s:enc:aescbc:v1:KeyName:).
const KeyName = "k1m-key-1"

// readKey reads a key file of builds before key sets. A key file readable
// by others, or of the wrong size, is refused with what to fix: it is
// never replaced, since the Secrets already written can be read only with
// it.
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

// Config is kube-apiserver's EncryptionConfiguration for Secrets, one
// aescbc provider per key (the servers of builds before key sets each
// made their own key of one name: separate providers let kube-apiserver
// try each). With encrypt on, new writes are encrypted with the write key
// and every other key and plaintext are still read; with it off (keys
// kept from an earlier run, or a set every server adopts before any
// encrypts), new writes are plaintext and encrypted ones are still read.
func Config(set KeySet, encrypt bool) ([]byte, error) {
	if err := set.Check(); err != nil {
		return nil, err
	}
	if set.Empty() {
		return nil, errors.New("no Secrets encryption key")
	}
	var providers []apiserverv1.ProviderConfiguration
	aescbc := func(k Key) apiserverv1.ProviderConfiguration {
		return apiserverv1.ProviderConfiguration{AESCBC: &apiserverv1.AESConfiguration{
			Keys: []apiserverv1.Key{{Name: k.Name, Secret: base64.StdEncoding.EncodeToString(k.Secret)}},
		}}
	}
	identity := apiserverv1.ProviderConfiguration{Identity: &apiserverv1.IdentityConfiguration{}}
	if !encrypt {
		providers = append(providers, identity)
	}
	for _, k := range set.Keys {
		if k.Name == set.Write {
			providers = append(providers, aescbc(k))
		}
	}
	for _, k := range set.Keys {
		if k.Name != set.Write {
			providers = append(providers, aescbc(k))
		}
	}
	if encrypt {
		providers = append(providers, identity)
	}
	cfg := apiserverv1.EncryptionConfiguration{
		Resources: []apiserverv1.ResourceConfiguration{{Resources: []string{"secrets"}, Providers: providers}},
	}
	cfg.APIVersion, cfg.Kind = apiserverv1.SchemeGroupVersion.String(), "EncryptionConfiguration"
	return yaml.Marshal(cfg)
}

// PrefixOf starts every Secret value encrypted with the key named name,
// in etcd.
func PrefixOf(name string) string { return "k8s:enc:aescbc:v1:" + name + ":" }

// Prefix starts every Secret value encrypted with the key of builds
// before key sets.
const Prefix = "k8s:enc:aescbc:v1:" + KeyName + ":"
