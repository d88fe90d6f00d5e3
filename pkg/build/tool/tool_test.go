package tool

import (
	"bytes"
	"strings"
	"testing"
)

// A flag given to a subcommand that does not take it is an error, not
// silently ignored.
func TestEachSubcommandTakesOnlyItsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--flavor", "stock"}, "verify: flag provided but not defined: -flavor"},
		{[]string{"ldflags", "--dir", "/x"}, "ldflags: flag provided but not defined: -dir"},
		{[]string{"build", "--continue"}, "build: flag provided but not defined: -continue"},
		{[]string{"export", "--bin", "/x"}, "export: flag provided but not defined: -bin"},
		{[]string{"images", "extra"}, `images takes no arguments, got ["extra"]`},
		{[]string{"ldflags", "--flavor", "patched"}, `ldflags --flavor "patched": want k1m or stock`},
		{[]string{"devtree"}, "devtree needs --dir DIR"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		var stderr bytes.Buffer
		err := Main(c.args, &bytes.Buffer{}, &stderr)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("k1m-build %v: got %v, want %q", c.args, err, c.want)
		}
	}
}

func TestEveryCommandIsInTheUsage(t *testing.T) {
	for name, cmd := range commands {
		if !strings.Contains(usage, "\n  "+name+" ") {
			t.Errorf("usage does not list %s", name)
		}
		for _, f := range cmd.flags {
			if !strings.Contains(usage, "--"+f) {
				t.Errorf("usage does not mention --%s (taken by %s)", f, name)
			}
		}
	}
}
