package cli

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
)

// A server token given as --token on the command line is warned of,
// before the config file is read (a missing --config stops each run right
// after); a join token, or one from $K1M_TOKEN, is not.
func TestServerTokenOnCommandLineWarns(t *testing.T) {
	const (
		join   = "K1M0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef::abcdef.0123456789abcdef"
		server = join + "::abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	)
	serverWarning := "k1m server: warning: --token on the command line is a server token, which opens the cluster's CA keys, and every local user reads it in /proc/PID/cmdline (ps shows it): " +
		"give it in --token-file FILE (mode 0600, deleted once this server has joined) or in $K1M_TOKEN"
	agentWarning := "k1m agent: warning: --token on the command line is a server token, which opens the cluster's CA keys, and every local user reads it in /proc/PID/cmdline (ps shows it): " +
		"give agents the join token (DATA-DIR/token, or k1m token create), in --token-file FILE (mode 0600, deleted once the node has its own certificate)"
	missing := filepath.Join(t.TempDir(), "config.yaml")
	for _, c := range []struct {
		name, env string
		args      []string
		want      string // the warning line; "" for none
	}{
		{"server token by flag", "", []string{"server", "--server", "https://[::1]:6443", "--token", server}, serverWarning},
		{"server token by flag, as --token=", "", []string{"server", "--server", "https://[::1]:6443", "--token=" + server}, serverWarning},
		{"join token by flag", "", []string{"server", "--server", "https://[::1]:6443", "--token", join}, ""},
		{"server token from the environment", server, []string{"server", "--server", "https://[::1]:6443"}, ""},
		{"agent, server token by flag", "", []string{"agent", "--server", "https://[::1]:6443", "--token", server}, agentWarning},
		{"agent, join token by flag", "", []string{"agent", "--server", "https://[::1]:6443", "--token", join}, ""},
		{"agent, server token from the environment", server, []string{"agent", "--server", "https://[::1]:6443"}, ""},
	} {
		if c.env != "" {
			t.Setenv("K1M_TOKEN", c.env)
		}
		root := newRootCommand()
		var stderr bytes.Buffer
		root.SetOut(io.Discard)
		root.SetErr(&stderr)
		root.SetArgs(append(c.args, "--config", missing))
		err := root.Execute()
		if err == nil {
			t.Fatalf("%s: ran with a missing --config", c.name)
		}
		want := "Error: " + err.Error() + "\n"
		if c.want != "" {
			want = c.want + "\n" + want
		}
		if stderr.String() != want {
			t.Errorf("%s: stderr\n got %q\nwant %q", c.name, stderr.String(), want)
		}
	}
}
