package join

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/pki"
)

func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	forever := pki.Token{Secret: "aaaaaa.0123456789abcdef"}
	daily := pki.Token{Secret: "bbbbbb.0123456789abcdef"}
	if _, err := CreateToken(ctx, client, forever, 0, ServerTokenDescription); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	info, err := CreateToken(ctx, client, daily, DefaultTokenTTL, "for rack 7")
	if err != nil {
		t.Fatal(err)
	}
	if d := info.Expires.Sub(start); d < DefaultTokenTTL-2*time.Second || d > DefaultTokenTTL+time.Second {
		t.Errorf("expires in %s, want %s", d, DefaultTokenTTL)
	}
	secret, _ := client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-bbbbbb", metav1.GetOptions{})
	want := map[string]string{"token-id": "bbbbbb", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true",
		"auth-extra-groups": BootstrapGroup, "description": "for rack 7", "expiration": info.Expires.Format(time.RFC3339)}
	got := map[string]string{}
	for k, v := range secret.Data {
		got[k] = string(v)
	}
	if !reflect.DeepEqual(got, want) || secret.Type != "bootstrap.kubernetes.io/token" {
		t.Errorf("Secret %v %v, want %v", secret.Type, got, want)
	}
	if _, err := CreateToken(ctx, client, daily, time.Hour, ""); err == nil || err.Error() != "a token with ID bbbbbb exists already" {
		t.Errorf("a second token with one ID: %v", err)
	}
	if _, err := CreateToken(ctx, client, pki.Token{Secret: "cccccc.0123456789abcdef"}, -time.Second, ""); err == nil || err.Error() != "--ttl -1s: want 0 (never expires) or a positive duration, e.g. 24h" {
		t.Errorf("negative TTL: %v", err)
	}
	// The fake keeps StringData as written; the API server would move it
	// to Data, which is what ListTokens reads.
	for _, name := range []string{"bootstrap-token-aaaaaa", "bootstrap-token-bbbbbb"} {
		s, _ := client.CoreV1().Secrets("kube-system").Get(ctx, name, metav1.GetOptions{})
		s.Data = map[string][]byte{}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		client.CoreV1().Secrets("kube-system").Update(ctx, s, metav1.UpdateOptions{})
	}
	if err := DeleteToken(ctx, client, "aaaaaa"); err != nil {
		t.Fatal(err)
	}
	if err := DeleteToken(ctx, client, "aaaaaa"); !errors.Is(err, ErrTokenNotFound) {
		t.Errorf("deleting twice: %v", err)
	}
	if err := DeleteToken(ctx, client, "AAAAAA"); err == nil || err.Error() != `token ID "AAAAAA": want `+TokenIDForm {
		t.Errorf("bad ID: %v", err)
	}
}

func TestTokenIDOf(t *testing.T) {
	whole := pki.Token{CAHash: "0123456789012345678901234567890123456789012345678901234567890123", Secret: "abcdef.0123456789abcdef"}.String()
	for in, want := range map[string]string{"abcdef": "abcdef", "abcdef.0123456789abcdef": "abcdef", whole: "abcdef"} {
		if got, err := TokenIDOf(in); err != nil || got != want {
			t.Errorf("TokenIDOf(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"abc", "ABCDEF", "abcdefg", ""} {
		if _, err := TokenIDOf(bad); err == nil {
			t.Errorf("TokenIDOf(%q) accepted", bad)
		}
	}
}
