package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
)

func TestPrintTokens(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printTokens(&out, []join.TokenInfo{
		{ID: "aaaaaa", Description: join.ServerTokenDescription},
		{ID: "bbbbbb", Expires: now.Add(time.Hour), Description: "rack 7"},
		{ID: "cccccc", Expires: now.Add(-time.Hour)},
	}, now)
	want := "ID      EXPIRES                         DESCRIPTION\n" +
		"aaaaaa  never                           k1m server join token (DATA-DIR/token)\n" +
		"bbbbbb  2026-11-23T13:00:00Z            rack 7\n" +
		"cccccc  2026-11-23T11:00:00Z (expired)  \n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestRotateReplacesTheServerToken(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	ca, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "k1m-ca")
	old, _ := newToken(ca.CertPEM)
	join.CreateToken(ctx, client, old, 0, join.ServerTokenDescription)
	path := filepath.Join(t.TempDir(), "token")
	os.WriteFile(path, []byte(old.String()+"\n"), 0o600)
	var out bytes.Buffer
	if err := rotate(ctx, client, ca.CertPEM, path, &out); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	now, err := pki.ParseToken(string(data))
	if err != nil || now.TokenID() == old.TokenID() || now.CAHash != old.CAHash {
		t.Fatalf("DATA-DIR/token after rotate: %q, %v", data, err)
	}
	if _, err := client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+old.TokenID(), metav1.GetOptions{}); err == nil {
		t.Error("the old token's Secret is still there")
	}
	if _, err := client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+now.TokenID(), metav1.GetOptions{}); err != nil {
		t.Errorf("the new token's Secret: %v", err)
	}
}
