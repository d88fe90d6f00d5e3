package etcd

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"k1m.dev/k1m/pkg/testutil"
)

func TestConfigServesTheLocalSocket(t *testing.T) {
	m := Member{Name: "durable", DataDir: "/d/etcd", Host: "::1", Port: 2379, LocalSocket: "/d/etcd-sockets/durable.sock"}
	cfg, err := config(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []url.URL{{Scheme: "https", Host: "[::1]:2379"}, {Scheme: "unix", Path: "/d/etcd-sockets/durable.sock"}}
	if !slices.Equal(cfg.ListenClientUrls, want) {
		t.Errorf("ListenClientUrls %v, want %v", cfg.ListenClientUrls, want)
	}
	if got := m.LocalURL(); got != "unix:///d/etcd-sockets/durable.sock" {
		t.Errorf("LocalURL %q", got)
	}
	if got := (Member{}).LocalURL(); got != "" {
		t.Errorf("LocalURL without a socket %q, want none", got)
	}
}

func TestConfigRefusesASocketPathTooLong(t *testing.T) {
	long := "/" + strings.Repeat("d", MaxSocketPath)
	_, err := config(Member{Name: "durable", Host: "::1", Port: 2379, LocalSocket: long})
	want := "etcd durable: its local socket " + long + " is 108 bytes long, over the 107 a unix socket path takes"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v, want %q", err, want)
	}
}

// TestLocalSocketServesWithoutTLSAndOnlyItsOwner starts a member with a
// local socket in a directory made world-readable beforehand: a client
// without a certificate writes over the socket, and a thread whose file
// system user is nobody cannot even connect to it (it can to a socket in
// a world-readable directory beside it, so the directory is what refuses).
func TestLocalSocketServesWithoutTLSAndOnlyItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	dir := t.TempDir()
	openToAll(t, dir)
	serverTLS, _ := certs(t, dir)
	sockets := filepath.Join(dir, "sockets")
	if err := os.Mkdir(sockets, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := Member{Name: "durable", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS,
		LocalSocket: filepath.Join(sockets, "durable.sock")}
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.LocalURL()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/k1m/local", "x"); err != nil {
		t.Fatalf("put over the local socket: %v", err)
	}
	if info, err := os.Stat(sockets); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory %v (%v), want mode 0700", info.Mode(), err)
	}

	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(open, "control.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chmod(filepath.Join(open, "control.sock"), 0o777)
	if err := testutil.DialUnixAsNobody(filepath.Join(open, "control.sock")); err != nil {
		t.Fatalf("control: nobody could not reach a socket in an open directory: %v", err)
	}
	if err := testutil.DialUnixAsNobody(m.LocalSocket); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("nobody dialling the local socket: %v, want permission denied", err)
	}
}

// A directory where another user could put a socket of their own is
// refused: clients trust whatever listens at the path.
func TestLocalSocketDirectoryOthersCouldReplaceIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory away")
	}
	dir := t.TempDir()
	given := filepath.Join(dir, "given")
	if err := os.Mkdir(given, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(given, testutil.Nobody, testutil.Nobody); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777) // past the umask
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{given, given + " belongs to uid 65534, not this process's 0"},
		{filepath.Join(given, "sockets"), given + ", above it, belongs to uid 65534"},
		{filepath.Join(open, "sockets"), open + ", above it, is writable by other users (mode -rwxrwxrwx)"},
		{filepath.Join(dir, "link"), filepath.Join(dir, "link") + " is not a directory (L---------)"},
	} {
		m := Member{Name: "durable", LocalSocket: filepath.Join(c.dir, "durable.sock")}
		want := "etcd durable: its local socket's directory: " + c.want
		if err := m.prepareSocketDir(); err == nil || err.Error() != want {
			t.Errorf("%s: err %v, want %q", c.dir, err, want)
		}
	}
	if err := CheckSocketDir(filepath.Join(dir, "sockets")); err != nil {
		t.Errorf("a directory to make under root's: %v", err)
	}
}

// openToAll lets every user through dir and its parent (t.TempDir makes
// both 0700), so that only what a test makes under it can refuse them.
func openToAll(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
