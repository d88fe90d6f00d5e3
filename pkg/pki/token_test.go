package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
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
	pool, err := tok.VerifyCA(ca.CertPEM)
	if err != nil {
		t.Fatalf("the token's own CA is refused: %v", err)
	}
	want := x509.NewCertPool()
	want.AddCert(ca.Cert)
	if !pool.Equal(want) {
		t.Error("the pool does not hold exactly the token's CA")
	}
	if _, err := tok.VerifyCA(other.CertPEM); err == nil || !strings.Contains(err.Error(), "not the one the token names") {
		t.Errorf("another CA was accepted: %v", err)
	}
	if !tok.SecretMatches(secret) || tok.SecretMatches(secret+"x") {
		t.Error("SecretMatches is wrong")
	}
}

// The man in the middle of issue 15: the real CA first (its hash matches
// the token), then a CA of the attacker's own. Trusting the bundle would
// trust his serving certificate.
func TestVerifyCARefusesAnythingButOneCA(t *testing.T) {
	dir := t.TempDir()
	ca, _ := LoadOrCreateCA(dir, "ca", "k1m-ca")
	attacker, _ := LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	leafPath, keyPath, err := ca.LoadOrIssue(dir, Leaf{Name: "leaf", CommonName: "leaf", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	leafPEM := readFile(t, leafPath)
	hash, _ := CAHash(ca.CertPEM)
	tok := Token{CAHash: hash, Secret: "abcdef.0123456789abcdef"}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"real CA then the attacker's", cat(ca.CertPEM, attacker.CertPEM), "the CA data holds 2 PEM blocks: want exactly one CERTIFICATE, the cluster CA the token pins"},
		{"attacker's CA then the real one", cat(attacker.CertPEM, ca.CertPEM), "the CA data holds 2 PEM blocks: want exactly one CERTIFICATE, the cluster CA the token pins"},
		{"CA then a private key", cat(ca.CertPEM, readFile(t, keyPath)), "the CA data holds 2 PEM blocks: want exactly one CERTIFICATE, the cluster CA the token pins"},
		{"CA then garbage", cat(ca.CertPEM, []byte("junk\n")), "the CA data has bytes after its certificate: want exactly one PEM CERTIFICATE"},
		{"a leaf, not a CA", leafPEM, `the certificate "leaf" is not a CA certificate (basic constraints CA:TRUE missing)`},
		{"a key alone", readFile(t, keyPath), `the CA data holds a PEM "PRIVATE KEY" block: want exactly one PEM CERTIFICATE`},
		{"nothing", nil, "the CA data holds no PEM block: want exactly one PEM CERTIFICATE"},
		{"a certificate block that does not parse", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}), "the CA certificate does not parse: x509: malformed certificate"},
	} {
		_, err := tok.VerifyCA(c.data)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		if _, err := CAHash(c.data); err == nil {
			t.Errorf("%s: CAHash hashed it", c.name)
		}
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
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

// A server token carries the seal after a second "::"; its join token is
// the same without it. A malformed seal is refused naming the form.
func TestServerTokenRoundTrip(t *testing.T) {
	seal, err := NewSeal()
	if err != nil {
		t.Fatal(err)
	}
	server := Token{CAHash: strings.Repeat("ab", 32), Secret: "k1mabc.0123456789abcdef", Seal: seal}
	got, err := ParseToken(server.String())
	if err != nil || got != server || !got.IsServerToken() {
		t.Fatalf("ParseToken(%s) = %+v, %v", server, got, err)
	}
	join := got.JoinToken()
	if join.IsServerToken() || join.String() != "K1M"+strings.Repeat("ab", 32)+"::k1mabc.0123456789abcdef" {
		t.Errorf("join token %s", join)
	}
	if other, _ := NewSeal(); other == seal || len(other) != 52 {
		t.Errorf("two seals %s and %s", seal, other)
	}
	_, err = ParseToken(join.String() + "::short")
	if err == nil || !strings.HasPrefix(err.Error(), "--token: its seal (after the second ::) is not 52 lower-case base32 characters") {
		t.Errorf("a short seal: %v", err)
	}
}

func TestChosenSecretIsNotTheExample(t *testing.T) {
	if err := CheckChosenSecret("k1mabc.0123456789abcdef"); err != nil {
		t.Errorf("a chosen secret: %v", err)
	}
	want := "the token secret abcdef.<redacted> is the documentation's example, which anyone can read: choose your own (k1m token create prints a random one) or leave it empty to have one generated"
	if err := CheckChosenSecret(ExampleSecret); err == nil || err.Error() != want {
		t.Errorf("the example: %v", err)
	}
}
