package pki

import (
	"strings"
	"testing"
)

func TestTokenRoundTripAndCACheck(t *testing.T) {
	dir := t.TempDir()
	ca, _ := LoadOrCreateCA(dir, "ca", "k1m-ca")
	other, _ := LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	hash, err := CAHash(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := NewSecret()
	tok, err := ParseToken(Token{CAHash: hash, Secret: secret}.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.VerifyCA(ca.CertPEM); err != nil {
		t.Errorf("the token's own CA is refused: %v", err)
	}
	if err := tok.VerifyCA(other.CertPEM); err == nil || !strings.Contains(err.Error(), "not the one the token names") {
		t.Errorf("another CA was accepted: %v", err)
	}
	if !tok.SecretMatches(secret) || tok.SecretMatches(secret+"x") {
		t.Error("SecretMatches is wrong")
	}
}

func TestParseTokenErrorsShowTheForm(t *testing.T) {
	for _, bad := range []string{"", "abc", "K1Mxyz::abcdef.0123456789abcdef", "K1M" + strings.Repeat("a", 64) + "::ABCDEF.0123456789abcdef", "K1M" + strings.Repeat("a", 64) + "::short", "K1M" + strings.Repeat("a", 64)} {
		_, err := ParseToken(bad)
		if err == nil || !strings.Contains(err.Error(), "--token") || !strings.Contains(err.Error(), "K1M<64 hex digits>::<token id>.<token secret>") {
			t.Errorf("ParseToken(%q): %v", bad, err)
		}
	}
}

func TestNewSecretIsABootstrapToken(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		s, err := NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckSecret(s); err != nil {
			t.Fatal(err)
		}
		if seen[s] {
			t.Fatalf("NewSecret repeated %s", s)
		}
		seen[s] = true
	}
	err := CheckSecret("abcdef.0123456789ABCDEF")
	if err == nil || strings.Contains(err.Error(), "0123456789ABCDEF") {
		t.Fatalf("want an error that does not show the secret, got %v", err)
	}
}
