package tool

import (
	"bytes"
	"os"
	"regexp"
	"slices"
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

// The Makefile passes the bench tools' paths to k1m-bench; they must be
// where bench-tools puts them.
func TestMakefileBenchToolPathsAreBenchTools(t *testing.T) {
	data, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// The value: the line after "BENCH_TOOLS =" and its continuations.
	m := regexp.MustCompile(`BENCH_TOOLS = ((?:[^\n]*\\\n)*[^\n]*)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the Makefile has no BENCH_TOOLS")
	}
	got := strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " "))
	p := benchToolPaths("$(OUT)")
	want := []string{"--benchplot", p.Benchplot}
	if !slices.Equal(got, want) {
		t.Errorf("Makefile BENCH_TOOLS %q, want %q", got, want)
	}
}
