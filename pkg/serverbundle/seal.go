package serverbundle

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
)

// sealed is a value encrypted with AES-256-GCM (the bundle under a key
// from the server token's seal, the Secrets key set under a key from the
// cluster CA's key).
type sealed struct {
	Version int    `json:"version"`
	Nonce   []byte `json:"nonce"`
	Data    []byte `json:"data"`
}

// sealedForm is one kind of sealed value: what it is (for errors; plural
// when it names several things), its version, the additional data bound
// into it, and the error for a key that does not open it.
type sealedForm struct {
	what       string
	plural     bool
	version    int
	additional []byte
	wrongKey   error
}

// seal encrypts v's JSON under a fresh nonce with the AEAD newAEAD makes.
func (f sealedForm) seal(v any, newAEAD func() (cipher.AEAD, error)) ([]byte, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD()
	if err != nil {
		return nil, err
	}
	s := sealed{Version: f.version, Nonce: make([]byte, aead.NonceSize())}
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, err
	}
	s.Data = aead.Seal(nil, s.Nonce, plain, f.additional)
	return json.Marshal(s)
}

// open decrypts what seal made into v.
func (f sealedForm) open(data []byte, newAEAD func() (cipher.AEAD, error), v any) error {
	var s sealed
	if err := json.Unmarshal(data, &s); err != nil || s.Version != f.version {
		return fmt.Errorf("%s %s not k1m's sealed form (version %d)", f.what, f.verb("is", "are"), f.version)
	}
	aead, err := newAEAD()
	if err != nil {
		return err
	}
	if len(s.Nonce) != aead.NonceSize() {
		return fmt.Errorf("%s %s a %d-byte nonce, want %d", f.what, f.verb("has", "have"), len(s.Nonce), aead.NonceSize())
	}
	plain, err := aead.Open(nil, s.Nonce, s.Data, f.additional)
	if err != nil {
		return f.wrongKey
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return fmt.Errorf("%s: %w", f.what, err)
	}
	return nil
}

func (f sealedForm) verb(singular, plural string) string {
	if f.plural {
		return plural
	}
	return singular
}
