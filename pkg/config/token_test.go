package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k1m.dev/k1m/pkg/pki"
)

// testServerToken is testJoinToken with a seal: a server token.
const testServerToken = testJoinToken + "::abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"

// testOtherJoinToken tells a token of $K1M_TOKEN from one of a file.
const testOtherJoinToken = "K1M" + testCAHash + "::fedcba.fedcba9876543210"

func requireNoTokenEnv(t *testing.T, after string) {
	t.Helper()
	if v, ok := os.LookupEnv(TokenEnv); ok {
		t.Errorf("after %s, $K1M_TOKEN is still set (%q): every child would inherit it", after, v)
	}
}

// An agent takes $K1M_TOKEN out of its environment at completion, and
// uses it only as --token's default.
func TestAgentCompleteTakesTokenEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(path, []byte(testJoinToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Agent)
		want string // the completed Token
	}{
		{"no --token", func(a *Agent) { a.Token = "" }, testOtherJoinToken},
		{"--token given", func(*Agent) {}, testJoinToken},
		{"--token-file given", func(a *Agent) { a.Token, a.TokenFile = "", path }, testJoinToken},
		// The server's own node runs on the certificate its server gives it.
		{"the server's own node", func(a *Agent) { a.Token, a.Embedded = "", true }, ""},
	} {
		t.Setenv(TokenEnv, testOtherJoinToken)
		a := joiningAgent()
		c.edit(&a)
		got, err := a.Complete()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.Token != c.want {
			t.Errorf("%s: completed with --token %q, want %q", c.name, got.Token, c.want)
		}
		requireNoTokenEnv(t, "an agent's completion ("+c.name+")")
	}
}

// A joining server reads --token-file at completion; once the server
// deleted it (after its join) it completes without a token, and says at
// the join whether it still needs one.
func TestServerTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server-join-token")
	if err := os.WriteFile(path, []byte(testServerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(TokenEnv, testOtherJoinToken) // --token-file wins over the default
	s, err := parse(t, "", "--server", "https://[fddf:4035:b520::1:1]:6443", "--token-file", path, "--data-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Complete()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := pki.ParseToken(testServerToken)
	if c.Token != testServerToken || c.JoinToken != want || c.RestartEnv() != nil {
		t.Errorf("completed with --token %q, JoinToken %+v, RestartEnv %q; want the file's server token and no environment", c.Token, c.JoinToken, c.RestartEnv())
	}
	requireNoTokenEnv(t, "a server's completion with --token-file")

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Complete(); err != nil || c.Token != "" || c.JoinToken != (pki.Token{}) {
		t.Errorf("after the file was deleted: %v, completed with --token %q", err, c.Token)
	}

	if err := os.WriteFile(path, []byte("nonsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, parseErr := pki.ParseToken("nonsense")
	if _, err := s.Complete(); err == nil || err.Error() != "--token-file "+path+": "+parseErr.Error() {
		t.Errorf("a file without a token:\n got %v\nwant --token-file %s: %v", err, path, parseErr)
	}
}

// A server token on the command line is warned of; a join token, or none,
// is not.
func TestCommandLineTokenWarning(t *testing.T) {
	const (
		server = "k1m server: warning: --token on the command line is a server token, which opens the cluster's CA keys, and every local user reads it in /proc/PID/cmdline (ps shows it): " +
			"give it in --token-file FILE (mode 0600, deleted once this server has joined) or in $K1M_TOKEN"
		agent = "k1m agent: warning: --token on the command line is a server token, which opens the cluster's CA keys, and every local user reads it in /proc/PID/cmdline (ps shows it): " +
			"give agents the join token (DATA-DIR/token, or k1m token create), in --token-file FILE (mode 0600, deleted once the node has its own certificate)"
	)
	for _, c := range []struct{ role, token, want string }{
		{"server", testServerToken, server},
		{"agent", testServerToken, agent},
		{"server", testJoinToken, ""},
		{"agent", testJoinToken, ""},
		{"server", "abcdef.0123456789abcdef", ""}, // a lone server's --token: a secret
		{"server", "", ""},
		{"agent", "nonsense", ""}, // refused by validation, with its own error
	} {
		if got := CommandLineTokenWarning(c.role, c.token); got != c.want {
			t.Errorf("%s --token %q:\n got %q\nwant %q", c.role, c.token, got, c.want)
		}
	}
}

// The defaults hold no token from the environment: what --token holds
// before the config file is applied is the command line's, and --help
// shows no token.
func TestDefaultsHoldNoTokenFromTheEnvironment(t *testing.T) {
	t.Setenv(TokenEnv, testServerToken)
	a, s := DefaultAgent(), DefaultServer()
	if a.Token != "" || s.Token != "" {
		t.Errorf("defaults with $K1M_TOKEN set: agent --token %q, server --token %q; want none", a.Token, s.Token)
	}
	if !reflect.DeepEqual(a, DefaultAgent()) {
		t.Error("DefaultAgent is not a pure function of nothing")
	}
}
