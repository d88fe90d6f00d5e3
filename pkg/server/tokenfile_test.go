package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/pki"
)

// Once the server's token files are written, --token-file is deleted: the
// server token stays in DATA-DIR/server-token alone.
func TestJoinedServerDeletesTokenFile(t *testing.T) {
	const hash = "0123456789012345678901234567890123456789012345678901234567890123"
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "server-join-token")
	if err := os.WriteFile(path, []byte("the install's copy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir, JoinServer: "https://[fddf:4035:b520::1:1]:6443", TokenFile: path}}, out: &out}
	seal, _ := pki.NewSeal()
	token := serverToken{Token: pki.Token{CAHash: hash, Secret: "abcdef.0123456789abcdef"}, seal: seal}
	if err := s.writeTokenFiles(token); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("--token-file still there after the token files were written: %v", err)
	}
	want := "k1m server: deleted --token-file " + path + ": this server has joined, and a restart needs no token\n"
	if out.String() != want {
		t.Errorf("output\n got %q\nwant %q", out.String(), want)
	}
	out.Reset()
	if err := s.writeTokenFiles(token); err != nil || out.Len() != 0 {
		t.Errorf("again, with the file gone: %v, output %q", err, out.String())
	}
}

// A server that must join and has no token (its --token-file is missing)
// stops before anything is fetched or written, naming the file.
func TestServerWithoutTokenDoesNotJoin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "server-join-token")
	s := &Server{cfg: &config.CompletedServer{Server: config.Server{DataDir: dir, JoinServer: "https://[fddf:4035:b520::1:1]:6443", TokenFile: path}}, out: &bytes.Buffer{}}
	_, err := s.phaseCluster(context.Background())
	want := "--token-file " + path + " does not exist, and this server has not joined the cluster of https://[fddf:4035:b520::1:1]:6443 yet: " +
		"write the cluster's server token (a server's DATA-DIR/server-token) to it, mode 0600 (k1m server deletes it once it has joined)"
	if err == nil || err.Error() != want {
		t.Errorf("phaseCluster\n got %v\nwant %s", err, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the data directory was written: %v", entries)
	}
}
