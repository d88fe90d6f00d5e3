package cli

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"k1m.dev/k1m/pkg/datadir"
)

// docPages are the pages whose commands are checked: the README and the
// reference pages under docs/ (dated records keep the commands of their
// day).
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, pages...)
}

// codeSpan is inline code in a Markdown line.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// docCommands returns each command line the page shows: its inline code
// spans, and the lines of its fenced blocks, with where they are.
func docCommands(path string) ([]docCommand, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cmds []docCommand
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for line := 1; s.Scan(); line++ {
		text := s.Text()
		if strings.HasPrefix(strings.TrimSpace(text), "```") {
			fenced = !fenced
			continue
		}
		where := fmt.Sprintf("%s:%d", filepath.Base(path), line)
		if fenced {
			cmds = append(cmds, docCommand{where, text})
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			cmds = append(cmds, docCommand{where, m[1]})
		}
	}
	return cmds, s.Err()
}

type docCommand struct{ where, text string }

// commandSeparators end one command on a line.
var commandSeparators = map[string]bool{"|": true, "||": true, "&&": true, ";": true, "\\": true, "#": true}

// unknownFlags returns the --flags that text gives a k1m command which
// that command does not have. Words after k1m that name no k1m command
// (a component run through k1m: kubectl, kube-apiserver ...) are skipped.
func unknownFlags(root *cobra.Command, text string) []string {
	words := strings.Fields(text)
	var unknown []string
	for i := 0; i < len(words); i++ {
		if words[i] != "k1m" {
			continue
		}
		cmd, j := root, i+1
		for ; j < len(words); j++ {
			sub := findSubcommand(cmd, words[j])
			if sub == nil {
				break
			}
			cmd = sub
		}
		if cmd == root {
			continue // k1m COMPONENT, or k1m alone
		}
		for ; j < len(words) && !commandSeparators[words[j]]; j++ {
			word := strings.Trim(words[j], "[](),.")
			if !strings.HasPrefix(word, "--") || word == "--" {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(word, "--"), "=")
			if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil && name != "help" {
				unknown = append(unknown, cmd.CommandPath()+" --"+name)
			}
		}
		i = j - 1
	}
	return unknown
}

func findSubcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// Every flag the docs give a k1m command is one that command has: a
// renamed or removed flag fails here, not in a reader's shell.
func TestDocsNameRealFlags(t *testing.T) {
	root := newRootCommand()
	checked := 0
	for _, page := range docPages(t) {
		cmds, err := docCommands(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if strings.Contains(c.text, "--") && strings.Contains(c.text, "k1m ") {
				checked++
			}
			for _, flag := range unknownFlags(root, c.text) {
				t.Errorf("%s: %s: no such flag (in %q)", c.where, flag, c.text)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no k1m command with a flag found in the docs: is the glob right?")
	}
}

func TestUnknownFlagsReadsCommandsAndSkipsComponents(t *testing.T) {
	root := newRootCommand()
	for _, c := range []struct {
		text string
		want []string
	}{
		{"k1m server --cluster-init --disable=metrics-server", nil},
		{"sudo k1m server --no-such-flag=1 | tee log", []string{"k1m server --no-such-flag"}},
		{"k1m token create [--ttl 24h] [--description TEXT]", nil},
		{"k1m token create --bogus && k1m agent --server URL", []string{"k1m token create --bogus"}},
		{"k1m kubectl get nodes --watch", nil},
		{"k1m server --help", nil},
		{"k1m etcd-snapshot save --data-dir D --frobnicate", []string{"k1m etcd-snapshot save --frobnicate"}},
	} {
		got := unknownFlags(root, c.text)
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("unknownFlags(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// dataDirPath is a path inside a server's data directory as help texts
// write it.
var dataDirPath = regexp.MustCompile(`DATA-DIR/[A-Za-z0-9_./-]*[A-Za-z0-9_-]`)

// serverDataPaths are the paths pkg/datadir names inside a server's data
// directory, relative to it: every method of datadir.Server that takes
// nothing and returns a path.
func serverDataPaths(t *testing.T) map[string]bool {
	t.Helper()
	const root = "/DATA-DIR"
	paths := map[string]bool{}
	v := reflect.ValueOf(datadir.Server(root))
	for i := 0; i < v.NumMethod(); i++ {
		m := v.Method(i)
		if m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.String {
			continue
		}
		if rel, ok := strings.CutPrefix(m.Call(nil)[0].String(), root+"/"); ok {
			paths[rel] = true
		}
	}
	if len(paths) < 10 {
		t.Fatalf("only %d paths from datadir.Server: %v", len(paths), paths)
	}
	return paths
}

// Every DATA-DIR path a command's help names is one pkg/datadir makes,
// so a renamed file cannot leave the help naming the old one.
func TestHelpNamesRealDataDirFiles(t *testing.T) {
	paths := serverDataPaths(t)
	found := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		texts := []string{c.Short, c.Long}
		c.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, text := range texts {
			for _, p := range dataDirPath.FindAllString(text, -1) {
				found++
				if rel := strings.TrimPrefix(p, "DATA-DIR/"); !paths[rel] {
					t.Errorf("%s's help names %s, which is no path of pkg/datadir", c.CommandPath(), p)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	if found == 0 {
		t.Fatal("no help text names a DATA-DIR path: is the pattern right?")
	}
}
