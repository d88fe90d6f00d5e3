// Package config holds every k1m server and agent setting in one place:
// flags, a config file with the same keys (/etc/k1m/config.yaml by
// default), defaults, validation, and the values derived from them.
package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	yaml "sigs.k8s.io/yaml/goyaml.v3"
)

// DefaultConfigFile is read when --config is not given; it may be absent.
const DefaultConfigFile = "/etc/k1m/config.yaml"

// ApplyFile sets, from the YAML file at path, every flag of fs that the
// command line did not set: the file's keys are the flag names, so flags
// win and both are parsed and checked alike. A missing file is an error
// only when explicit is true.
//
// The file is read strictly: a key given twice is refused, and each value
// must have the YAML type of its flag (a string flag takes a string, a
// boolean flag true or false, a number flag a number). So `node-name: no`
// or `node-name: 0123`, which YAML reads as a boolean or a number, is
// refused with the advice to quote it, never turned into "false" or "83".
func ApplyFile(fs *pflag.FlagSet, path string, explicit bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("--config %s: not valid YAML: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file, or comments only
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("--config %s: want a mapping of flag names to values at the top, e.g. node-lease-renew-interval: 10s", path)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, value := top.Content[i], top.Content[i+1]
		// A renamed flag's old and current names are one setting.
		setting := key.Value
		if current, renamed := RenamedFlags[setting]; renamed {
			setting = current
		}
		if line, dup := seen[setting]; dup {
			return fmt.Errorf("--config %s: key %s is given twice (lines %d and %d): give it once", path, setting, line, key.Line)
		}
		seen[setting] = key.Line
		flag := fs.Lookup(key.Value)
		if flag == nil || key.Value == "config" {
			return fmt.Errorf("--config %s: unknown key %q; the keys are the flag names: %s", path, key.Value, flagNames(fs))
		}
		if changedOnCommandLine(fs, setting) {
			continue // the command line wins
		}
		if err := setFromFile(fs, flag, value); err != nil {
			return fmt.Errorf("--config %s: key %s (line %d): %w", path, key.Value, value.Line, err)
		}
	}
	return nil
}

// The YAML tags each kind of flag accepts.
var tagsFor = map[string][]string{
	"bool":        {"!!bool"},
	"int":         {"!!int"},
	"int64":       {"!!int"},
	"stringArray": {"!!str"},
	"stringSlice": {"!!str"},
}

// setFromFile sets one flag from a YAML value of the flag's type. A list
// given to a repeatable flag (a pass-through --COMPONENT-arg) sets one
// value per item, so that values holding commas stay whole.
func setFromFile(fs *pflag.FlagSet, flag *pflag.Flag, v *yaml.Node) error {
	kind := flag.Value.Type()
	if v.Kind == yaml.SequenceNode {
		if kind != "stringArray" && kind != "stringSlice" {
			return fmt.Errorf("a list, but --%s takes one %s value", flag.Name, kind)
		}
		for _, item := range v.Content {
			if err := setFromFile(fs, flag, item); err != nil {
				return err
			}
		}
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a %s value, got a YAML mapping", kind)
	}
	want, ok := tagsFor[kind]
	if !ok {
		want = []string{"!!str"} // strings, durations, addresses, ...
	}
	if !slices.Contains(want, v.ShortTag()) {
		return fmt.Errorf("YAML reads %q as %s, but --%s takes %s: quote it (%s: %q) or write it as the flag takes it", v.Value, tagName(v.ShortTag()), flag.Name, kindName(kind), flag.Name, v.Value)
	}
	return fs.Set(flag.Name, v.Value)
}

func tagName(tag string) string {
	switch tag {
	case "!!bool":
		return "a boolean"
	case "!!int", "!!float":
		return "a number"
	case "!!null":
		return "no value (null)"
	case "!!str":
		return "a string"
	}
	return tag
}

func kindName(kind string) string {
	switch kind {
	case "bool":
		return "true or false"
	case "int", "int64":
		return "a whole number"
	case "duration":
		return "a duration such as 10s (a string)"
	}
	return "a string"
}

func flagNames(fs *pflag.FlagSet) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" {
			names = append(names, f.Name)
		}
	})
	return strings.Join(names, ", ")
}

// changedOnCommandLine tells whether the flag named setting, or an old
// name of it (RenamedFlags), was given.
func changedOnCommandLine(fs *pflag.FlagSet, setting string) bool {
	if f := fs.Lookup(setting); f != nil && f.Changed {
		return true
	}
	for old, current := range RenamedFlags {
		if f := fs.Lookup(old); current == setting && f != nil && f.Changed {
			return true
		}
	}
	return false
}
