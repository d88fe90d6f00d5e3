package etcd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The first cluster's claim holds; it claims again after a restart; a
// second cluster is refused with both CA hashes named.
func TestClaimRefusesASecondCluster(t *testing.T) {
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := Member{Name: "external", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS}
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	cli := client(t, m, clientTLS)
	if err := Claim(ctx, cli, "sha256:aaaa"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if err := Claim(ctx, cli, "sha256:aaaa"); err != nil {
		t.Fatalf("the same cluster again: %v", err)
	}
	err = Claim(ctx, cli, "sha256:bbbb")
	want := "the etcd holds another cluster's data (its /k1m/cluster-ca is sha256:aaaa, this cluster's sha256:bbbb)"
	if !errors.Is(err, ErrClaimed) || err.Error() != want {
		t.Errorf("a second cluster: %v, want %q", err, want)
	}
}

// A member with ClientCAFile accepts clients of the CAs it bundles (an
// external etcd's client certificate, which kube-apiserver presents to
// every store) while its peers still need the etcd CA.
func TestClientCAFileTrustsTheBundle(t *testing.T) {
	dir := t.TempDir()
	serverTLS, ownClient := certs(t, dir)
	otherDir := filepath.Join(dir, "other")
	_, otherClient := certs(t, otherDir) // another CA's client certificate
	own, _ := os.ReadFile(serverTLS.CAFile)
	other, _ := os.ReadFile(otherClient.CAFile)
	bundle := filepath.Join(dir, "bundle.crt")
	if err := os.WriteFile(bundle, append(own, other...), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	withBundle := serverTLS
	withBundle.ClientCAFile = bundle
	m := Member{Name: "bundled", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: freePortPair(t), TLS: withBundle}
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	// The other CA's client, checking the server against the etcd CA.
	foreign := TLS{CertFile: otherClient.CertFile, KeyFile: otherClient.KeyFile, CAFile: serverTLS.CAFile}
	for name, tls := range map[string]TLS{"own": ownClient, "foreign": foreign} {
		if _, err := client(t, m, tls).Put(ctx, "/k1m/test", name); err != nil {
			t.Errorf("%s client: %v", name, err)
		}
	}
	// Without the bundle the other CA's client is refused.
	plainDir := filepath.Join(dir, "plain")
	m2 := Member{Name: "plain", DataDir: plainDir, Host: "::1", Port: freePortPair(t), TLS: serverTLS}
	r2, err := Start(ctx, m2)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Stop()
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if _, err := client(t, m2, foreign).Put(short, "/k1m/test", "foreign"); err == nil {
		t.Error("a member without the bundle accepted another CA's client")
	}
}
