package secretsenc

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"k1m.dev/k1m/pkg/fsutil"
)

// Key is one AES-256 key of the set; its name is part of the prefix of
// every value it encrypted (k8s:enc:aescbc:v1:NAME:).
type Key struct {
	Name   string `json:"name"`
	Secret []byte `json:"secret"`
}

// KeySet is every key Secrets of a cluster may be encrypted with, newest
// first, and the one new Secrets are encrypted with (when the server
// encrypts, --secrets-encryption). On several servers it is one
// cluster-wide value: every server runs with the same set (package
// serverbundle seals it, package server adopts it at start).
type KeySet struct {
	Keys []Key `json:"keys"`
	// Write names the key new Secrets are encrypted with.
	Write string `json:"write"`
}

// Empty tells whether the set holds no key.
func (s KeySet) Empty() bool { return len(s.Keys) == 0 }

// Pending is the key prepared (PrepareKey) but not yet the write key:
// the newest, when it is not Write.
func (s KeySet) Pending() (Key, bool) {
	if s.Empty() || s.Keys[0].Name == s.Write {
		return Key{}, false
	}
	return s.Keys[0], true
}

// Names lists the keys' names, in order.
func (s KeySet) Names() []string {
	names := make([]string, 0, len(s.Keys))
	for _, k := range s.Keys {
		names = append(names, k.Name)
	}
	return names
}

func (s KeySet) has(k Key) bool {
	return slices.ContainsFunc(s.Keys, func(o Key) bool { return o.Name == k.Name && bytes.Equal(o.Secret, k.Secret) })
}

// Check refuses a set kube-apiserver could not use, or one that could not
// read what its write key wrote.
func (s KeySet) Check() error {
	if s.Empty() {
		return nil
	}
	write := false
	for _, k := range s.Keys {
		if len(k.Secret) != KeySize {
			return fmt.Errorf("the Secrets encryption key %s holds %d bytes: want %d (AES-256)", k.Name, len(k.Secret), KeySize)
		}
		if k.Name == "" {
			return errors.New("a Secrets encryption key has no name")
		}
		write = write || k.Name == s.Write
	}
	if !write {
		return fmt.Errorf("the Secrets encryption key set writes with %q, which it does not hold (it holds %v)", s.Write, s.Names())
	}
	return nil
}

// NewKey makes a key with a random name: two servers making one at the
// same time never make two keys of one name.
func NewKey() (Key, error) {
	secret := make([]byte, KeySize)
	id := make([]byte, 6)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, err
	}
	if _, err := rand.Read(id); err != nil {
		return Key{}, err
	}
	return Key{Name: "k1m-key-" + hex.EncodeToString(id), Secret: secret}, nil
}

// NewKeySet is a set of one new key, which writes.
func NewKeySet() (KeySet, error) {
	k, err := NewKey()
	return KeySet{Keys: []Key{k}, Write: k.Name}, err
}

// ErrKeyPrepared says a key is prepared already: rotate to it first.
var ErrKeyPrepared = errors.New("a new Secrets encryption key is prepared already")

// ErrNoKeyPrepared says there is nothing to rotate to.
var ErrNoKeyPrepared = errors.New("no new Secrets encryption key is prepared")

// PrepareKey adds a new key that every server reads with but none writes
// with yet (the first step of a rotation: once every server runs with it,
// RotateKey makes it the write key, and no server meets a Secret it
// cannot read). A set without keys gets one key, which writes.
func PrepareKey(s KeySet) (KeySet, error) {
	if s.Empty() {
		return NewKeySet()
	}
	if p, ok := s.Pending(); ok {
		return KeySet{}, fmt.Errorf("%w: %s", ErrKeyPrepared, p.Name)
	}
	k, err := NewKey()
	if err != nil {
		return KeySet{}, err
	}
	return KeySet{Keys: append([]Key{k}, s.Keys...), Write: s.Write}, nil
}

// RotateKey makes the prepared key the write key. The older keys stay:
// Secrets written with them stay readable until rewritten.
func RotateKey(s KeySet) (KeySet, error) {
	p, ok := s.Pending()
	if !ok {
		return KeySet{}, ErrNoKeyPrepared
	}
	return KeySet{Keys: slices.Clone(s.Keys), Write: p.Name}, nil
}

// Adopt is the set a server runs with: the cluster's (its keys, its
// order, its write key), and after them every key of the server's own set
// the cluster's lacks, since Secrets may still be encrypted with it
// (a server of a build that made its own key, or one that created a set
// while another did too). added tells whether such a key was kept: the
// cluster's set must then take it, so that the other servers read those
// Secrets too. With no cluster set, the server's own is the cluster's.
func Adopt(cluster, local KeySet) (adopted KeySet, added bool) {
	if cluster.Empty() {
		return local, !local.Empty()
	}
	adopted = KeySet{Keys: slices.Clone(cluster.Keys), Write: cluster.Write}
	for _, k := range local.Keys {
		if !adopted.has(k) {
			adopted.Keys = append(adopted.Keys, k)
			added = true
		}
	}
	return adopted, added
}

// Equal tells whether two sets are the same value.
func (s KeySet) Equal(o KeySet) bool {
	return s.Write == o.Write && slices.EqualFunc(s.Keys, o.Keys, func(a, b Key) bool { return a.Name == b.Name && bytes.Equal(a.Secret, b.Secret) })
}

// LegacyKeyName names the one key of a key file of builds before key
// sets (secrets-encryption.key); Secrets it encrypted carry this name.
const LegacyKeyName = KeyName

// LoadKeySet reads the server's key set: setPath (JSON, mode 0600), or
// else the one key of legacyPath as a set that writes with it. Neither
// file: an empty set. A file readable by others, or a bad key, is refused
// with what to fix; nothing is rewritten.
func LoadKeySet(setPath, legacyPath string) (KeySet, error) {
	if err := checkMode(setPath); err == nil {
		data, err := os.ReadFile(setPath)
		if err != nil {
			return KeySet{}, err
		}
		var s KeySet
		if err := json.Unmarshal(data, &s); err != nil {
			return KeySet{}, fmt.Errorf("the Secrets encryption key set %s: %v", setPath, err)
		}
		if err := s.Check(); err != nil {
			return KeySet{}, fmt.Errorf("the Secrets encryption key set %s: %w", setPath, err)
		}
		return s, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return KeySet{}, err
	}
	key, err := readKey(legacyPath)
	if errors.Is(err, os.ErrNotExist) {
		return KeySet{}, nil
	}
	if err != nil {
		return KeySet{}, err
	}
	return KeySet{Keys: []Key{{Name: LegacyKeyName, Secret: key}}, Write: LegacyKeyName}, nil
}

func checkMode(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("the Secrets encryption key set %s has mode %#o: want 0600, readable by root alone (chmod 600 %s)", path, perm, path)
	}
	return nil
}

// SaveKeySet writes the set to path, mode 0600.
func SaveKeySet(path string, s KeySet) error {
	if err := s.Check(); err != nil {
		return err
	}
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return fsutil.WriteFile(path, append(data, '\n'), 0o600)
}
