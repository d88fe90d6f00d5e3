package cli

import (
	"bytes"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVersionCommand(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "k1m ") || !strings.Contains(out, "commit ") {
		t.Errorf("k1m version printed %q; want a k1m line naming the commit", out)
	}
	if _, err := run(t, "version", "extra"); err == nil {
		t.Error("k1m version accepted an argument")
	}
}

func TestUnknownCommandIsNamed(t *testing.T) {
	if _, err := run(t, "frobnicate"); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %v", err)
	}
}
