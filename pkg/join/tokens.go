package join

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/pki"
)

// Join tokens are Kubernetes bootstrap tokens: a Secret
// bootstrap-token-<id> in kube-system that kube-apiserver authenticates
// (as group BootstrapGroup) until its expiration, and that the
// controller manager's tokencleaner deletes once expired. A deleted or
// expired token authenticates nothing, so it joins nothing; nodes that
// joined with it live on their own certificates and are not affected.

// ServerTokenDescription marks the server's own join token (DATA-DIR/token).
const ServerTokenDescription = "k1m server join token (DATA-DIR/token)"

// DefaultTokenTTL is how long a token from `k1m token create` lives unless
// told otherwise: kubeadm's 24 hours.
const DefaultTokenTTL = 24 * time.Hour

var tokenIDRE = regexp.MustCompile(`^[a-z0-9]{6}$`)

// TokenIDForm describes a valid token ID, for errors.
const TokenIDForm = "6 lowercase letters or digits (the part before the dot), e.g. abcdef"

// CheckTokenID checks the form of a token ID.
func CheckTokenID(id string) error {
	if !tokenIDRE.MatchString(id) {
		return fmt.Errorf("token ID %q: want %s", id, TokenIDForm)
	}
	return nil
}

// TokenInfo describes one join token, without its secret half.
type TokenInfo struct {
	ID          string
	Description string
	Expires     time.Time // zero: never
	Groups      string
}

func secretName(id string) string { return "bootstrap-token-" + id }

// CreateToken stores token as a new bootstrap token that expires after ttl
// (0: never). It refuses to overwrite an existing one with that ID.
func CreateToken(ctx context.Context, client kubernetes.Interface, token pki.Token, ttl time.Duration, description string) (TokenInfo, error) {
	if ttl < 0 {
		return TokenInfo{}, fmt.Errorf("--ttl %s: want 0 (never expires) or a positive duration, e.g. 24h", ttl)
	}
	info := TokenInfo{ID: token.TokenID(), Description: description, Groups: BootstrapGroup}
	data := map[string]string{
		"token-id":                       token.TokenID(),
		"token-secret":                   token.TokenSecret(),
		"usage-bootstrap-authentication": "true",
		"auth-extra-groups":              BootstrapGroup,
		"description":                    description,
	}
	if ttl > 0 {
		info.Expires = time.Now().Add(ttl).UTC().Truncate(time.Second)
		data["expiration"] = info.Expires.Format(time.RFC3339)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName(token.TokenID()), Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		Data:       map[string][]byte{},
	}
	for k, v := range data {
		secret.Data[k] = []byte(v)
	}
	_, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return TokenInfo{}, fmt.Errorf("a token with ID %s exists already", token.TokenID())
	}
	if err != nil {
		return TokenInfo{}, fmt.Errorf("creating Secret %s/%s: %w", metav1.NamespaceSystem, secret.Name, err)
	}
	return info, nil
}

// ListTokens lists the join tokens, by ID.
func ListTokens(ctx context.Context, client kubernetes.Interface) ([]TokenInfo, error) {
	list, err := client.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
	if err != nil {
		return nil, fmt.Errorf("listing bootstrap tokens: %w", err)
	}
	var out []TokenInfo
	for _, s := range list.Items {
		info := TokenInfo{ID: string(s.Data["token-id"]), Description: string(s.Data["description"]), Groups: string(s.Data["auth-extra-groups"])}
		if exp := string(s.Data["expiration"]); exp != "" {
			info.Expires, _ = time.Parse(time.RFC3339, exp)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ErrTokenNotFound is returned when no token has the ID.
var ErrTokenNotFound = errors.New("no such token")

// DeleteToken deletes the token with the given ID.
func DeleteToken(ctx context.Context, client kubernetes.Interface, id string) error {
	if err := CheckTokenID(id); err != nil {
		return err
	}
	err := client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, secretName(id), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("token %s: %w (k1m token list shows the IDs)", id, ErrTokenNotFound)
	}
	if err != nil {
		return fmt.Errorf("deleting token %s: %w", id, err)
	}
	return nil
}

// TokenIDOf accepts a token ID, an id.secret pair or a whole K1M token
// and returns the ID.
func TokenIDOf(s string) (string, error) {
	if strings.HasPrefix(s, "K1M") {
		t, err := pki.ParseToken(s)
		if err != nil {
			return "", err
		}
		return t.TokenID(), nil
	}
	id, _, _ := strings.Cut(s, ".")
	return id, CheckTokenID(id)
}

// EnsureToken makes token the server's one join token: its Secret is
// created (or updated, when a start that made it died before writing
// DATA-DIR/token) without expiry, and any other server token, left by
// such a start, is deleted.
func EnsureToken(ctx context.Context, client kubernetes.Interface, token pki.Token, description string) error {
	if err := DeleteToken(ctx, client, token.TokenID()); err != nil && !errors.Is(err, ErrTokenNotFound) {
		return err
	}
	if _, err := CreateToken(ctx, client, token, 0, description); err != nil {
		return err
	}
	tokens, err := ListTokens(ctx, client)
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if t.Description == description && t.ID != token.TokenID() {
			if err := DeleteToken(ctx, client, t.ID); err != nil && !errors.Is(err, ErrTokenNotFound) {
				return err
			}
		}
	}
	return nil
}

// CurrentServerToken returns the secret (id.secret) of the servers' join
// token (ServerTokenDescription), which k1m token rotate on any server
// replaces; found is false when there is none, or several.
func CurrentServerToken(ctx context.Context, client kubernetes.Interface) (secret string, found bool, err error) {
	list, err := client.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
	if err != nil {
		return "", false, fmt.Errorf("listing bootstrap tokens: %w", err)
	}
	var secrets []string
	for _, s := range list.Items {
		if string(s.Data["description"]) == ServerTokenDescription {
			secrets = append(secrets, string(s.Data["token-id"])+"."+string(s.Data["token-secret"]))
		}
	}
	if len(secrets) != 1 {
		return "", false, nil
	}
	return secrets[0], true, nil
}
