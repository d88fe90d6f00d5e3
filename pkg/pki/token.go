package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base32"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
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
	// Seal, in a server token only (K1M<hash>::<secret>::<seal>), is the
	// key of the bundle of CA keys servers share (package bootstrap). It
	// is never stored in the cluster: a join token, or anyone who reads
	// the cluster's Secrets or an etcd snapshot, cannot open the bundle.
	Seal string
}

// sealRE is a seal: 256 random bits in lower-case base32, unpadded.
var sealRE = regexp.MustCompile(`^[a-z2-7]{52}$`)

// NewSeal returns a random seal.
func NewSeal() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)), nil
}

// IsServerToken tells a server token (it carries the seal) from an
// agent's join token.
func (t Token) IsServerToken() bool { return t.Seal != "" }

// JoinToken is the token without its seal: what joins an agent.
func (t Token) JoinToken() Token { return Token{CAHash: t.CAHash, Secret: t.Secret} }

// The secret is a Kubernetes bootstrap token, "<6>.<16>" lowercase
// letters and digits: kube-apiserver authenticates it natively
// (--enable-bootstrap-token-auth) and the kubelet's TLS bootstrap uses it.
var bootstrapTokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

// SecretForm describes a valid secret, for error messages.
const SecretForm = "a bootstrap token: 6 and 16 lowercase letters or digits joined by a dot, e.g. abcdef.0123456789abcdef"

// NewSecret returns a random bootstrap token.
func NewSecret() (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 22)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:6]) + "." + string(b[6:]), nil
}

// CheckSecret checks the bootstrap-token form of a secret.
func CheckSecret(secret string) error {
	if !bootstrapTokenRE.MatchString(secret) {
		return fmt.Errorf("the token secret %q is not %s", redact(secret), SecretForm)
	}
	return nil
}

// ExampleSecret is the token the documentation (k1m's, kubeadm's) shows:
// known to everyone, so never a cluster's own.
const ExampleSecret = "abcdef.0123456789abcdef"

// CheckChosenSecret checks a secret an operator chose for a new cluster:
// the bootstrap-token form, and not the documentation's example.
func CheckChosenSecret(secret string) error {
	if err := CheckSecret(secret); err != nil {
		return err
	}
	if secret == ExampleSecret {
		return fmt.Errorf("the token secret %s is the documentation's example, which anyone can read: choose your own (k1m token create prints a random one) or leave it empty to have one generated", redact(secret))
	}
	return nil
}

// TokenID is the public half of the secret (the bootstrap token's ID);
// the other half is never logged.
func (t Token) TokenID() string { return strings.SplitN(t.Secret, ".", 2)[0] }

// TokenSecret is the private half.
func (t Token) TokenSecret() string { return strings.SplitN(t.Secret, ".", 2)[1] }

// redact keeps the token ID of a secret and hides the rest.
func redact(secret string) string {
	if id, _, ok := strings.Cut(secret, "."); ok && len(id) <= 6 {
		return id + ".<redacted>"
	}
	return "<redacted>"
}

// ParseCA reads the cluster CA a join token pins: exactly one PEM block,
// a CERTIFICATE, that parses and is a CA. Anything more is refused, not
// skipped: the token's hash covers one certificate, so a second one in
// the bundle would be trusted without having been checked (a man in the
// middle could append his own CA and pass).
func ParseCA(caPEM []byte) (*x509.Certificate, error) {
	block, rest := pem.Decode(caPEM)
	if block == nil {
		return nil, errors.New("the CA data holds no PEM block: want exactly one PEM CERTIFICATE")
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("the CA data holds a PEM %q block: want exactly one PEM CERTIFICATE", block.Type)
	}
	if extra := countPEMBlocks(rest); extra > 0 {
		return nil, fmt.Errorf("the CA data holds %d PEM blocks: want exactly one CERTIFICATE, the cluster CA the token pins", extra+1)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("the CA data has bytes after its certificate: want exactly one PEM CERTIFICATE")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA certificate does not parse: %v", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("the certificate %q is not a CA certificate (basic constraints CA:TRUE missing)", cert.Subject.CommonName)
	}
	return cert, nil
}

func countPEMBlocks(data []byte) int {
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return n
		}
		n++
	}
}

// CAHash is the hex SHA-256 of the DER form of the one CA certificate in
// caPEM (see ParseCA).
func CAHash(caPEM []byte) (string, error) {
	cert, err := ParseCA(caPEM)
	if err != nil {
		return "", err
	}
	return hashCert(cert), nil
}

func hashCert(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

// String renders the token.
func (t Token) String() string {
	if t.Seal != "" {
		return tokenPrefix + t.CAHash + "::" + t.Secret + "::" + t.Seal
	}
	return tokenPrefix + t.CAHash + "::" + t.Secret
}

// ParseToken reads a token, with an error that shows the valid form.
func ParseToken(s string) (Token, error) {
	const form = "K1M<64 hex digits>::<token id>.<token secret> (the server prints it and keeps it in DATA-DIR/token), or a server token, the same followed by ::<seal> (DATA-DIR/server-token)"
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	hash, secret, found := strings.Cut(rest, "::")
	if !ok || !found {
		return Token{}, fmt.Errorf("--token is not of the form %s", form)
	}
	secret, seal, sealed := strings.Cut(secret, "::")
	if sealed && !sealRE.MatchString(seal) {
		return Token{}, fmt.Errorf("--token: its seal (after the second ::) is not 52 lower-case base32 characters; want %s", form)
	}
	if _, err := hex.DecodeString(hash); err != nil || len(hash) != 64 {
		return Token{}, fmt.Errorf("--token: the CA hash is not 64 hex digits; want %s", form)
	}
	if err := CheckSecret(secret); err != nil {
		return Token{}, fmt.Errorf("--token: %v; want %s", err, form)
	}
	return Token{CAHash: strings.ToLower(hash), Secret: secret, Seal: seal}, nil
}

// VerifyCA checks that caPEM is exactly the one CA the token names and
// returns a pool that trusts that certificate alone.
func (t Token) VerifyCA(caPEM []byte) (*x509.CertPool, error) {
	cert, err := ParseCA(caPEM)
	if err != nil {
		return nil, err
	}
	got := hashCert(cert)
	if subtle.ConstantTimeCompare([]byte(got), []byte(t.CAHash)) != 1 {
		return nil, fmt.Errorf("the server's CA (sha256 %s) is not the one the token names (%s): wrong server, or a stale token", got, t.CAHash)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}

// SecretMatches compares a presented secret in constant time.
func (t Token) SecretMatches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(t.Secret), []byte(secret)) == 1
}
