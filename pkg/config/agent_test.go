package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestAgentPodLogsDirMustBeAbsolute(t *testing.T) {
	a := DefaultAgent()
	a.Server, a.NodeIP = "https://[fddf:4035:b520::1]:6443", "fddf:4035:b520::11"
	a.PodLogsDir = "pod-logs"
	err := a.Validate()
	if err == nil || !strings.Contains(err.Error(), "--pod-logs-dir") || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative --pod-logs-dir: %v", err)
	}
}

func TestAgentServerURL(t *testing.T) {
	for _, c := range []struct{ server, want string }{
		{"https://[fddf:4035:b520::1]:6443", ""},
		{"https://[fddf:4035:b520::1]:6443/", ""},
		{"https://k1m.example", ""},
		{"", `--server "": want the server's https URL, e.g. https://[fddf:4035:b520::1]:6443`},
		{"http://[fddf:4035:b520::1]:6443", `--server "http://[fddf:4035:b520::1]:6443": want the server's https URL, e.g. https://[fddf:4035:b520::1]:6443`},
		// The agent's load balancer forwards to host:port: a path would be lost.
		{"https://[fddf:4035:b520::1]:6443/k1m", `--server "https://[fddf:4035:b520::1]:6443/k1m": want the server's https URL, e.g. https://[fddf:4035:b520::1]:6443`},
	} {
		a := DefaultAgent()
		a.DataDir, a.RunDir = t.TempDir(), t.TempDir()
		a.Server, a.NodeIP, a.Token = c.server, "fddf:4035:b520::11", ""
		got := ""
		if err := a.Validate(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("--server %q:\n got %q\nwant %q", c.server, got, c.want)
		}
	}
}

func TestAgentServerHelpSaysJoinOnly(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	a := DefaultAgent()
	a.AddFlags(fs)
	want := "URL of a k1m server, e.g. https://[fddf:4035:b520::1]:6443: needed only to join; afterwards the agent follows the cluster's API servers (its load balancer on [::1]:6444) and tries this one last"
	if got := fs.Lookup("server").Usage; got != want {
		t.Errorf("--server help\n got %q\nwant %q", got, want)
	}
}
