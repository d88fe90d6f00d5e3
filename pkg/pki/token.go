package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
)

// A join token names the cluster CA (the SHA-256 of its DER certificate)
// and carries a secret: K1M<64 hex digits>::<secret>. An agent trusts the
// CA it downloads only when the hash matches, so the token alone bootstraps
// trust without a man in the middle.
const tokenPrefix = "K1M"

// Token is a parsed join token.
type Token struct {
	CAHash string // hex SHA-256 of the CA certificate (DER)
	Secret string
}

// NewSecret returns a random secret for a token.
func NewSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// CAHash is the hex SHA-256 of the first certificate in caPEM.
func CAHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", fmt.Errorf("no PEM certificate in the CA data")
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:]), nil
}

// String renders the token.
func (t Token) String() string {
	return tokenPrefix + t.CAHash + "::" + t.Secret
}

// ParseToken reads a token, with an error that shows the valid form.
func ParseToken(s string) (Token, error) {
	const form = "K1M<64 hex digits>::<secret> (the server prints it and keeps it in its token file)"
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	hash, secret, found := strings.Cut(rest, "::")
	if !ok || !found {
		return Token{}, fmt.Errorf("--token is not of the form %s", form)
	}
	if _, err := hex.DecodeString(hash); err != nil || len(hash) != 64 {
		return Token{}, fmt.Errorf("--token: the CA hash is not 64 hex digits; want %s", form)
	}
	if len(secret) < 16 {
		return Token{}, fmt.Errorf("--token: the secret is shorter than 16 characters; want %s", form)
	}
	return Token{CAHash: strings.ToLower(hash), Secret: secret}, nil
}

// VerifyCA checks that caPEM is the CA the token names.
func (t Token) VerifyCA(caPEM []byte) error {
	got, err := CAHash(caPEM)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(t.CAHash)) != 1 {
		return fmt.Errorf("the server's CA (sha256 %s) is not the one the token names (%s): wrong server, or a stale token", got, t.CAHash)
	}
	return nil
}

// SecretMatches compares a presented secret in constant time.
func (t Token) SecretMatches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(t.Secret), []byte(secret)) == 1
}
