// Package config holds every k1m server and agent setting in one place:
// flags, a config file with the same keys (/etc/k1m/config.yaml by
// default), defaults, validation, and the values derived from them.
package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// DefaultConfigFile is read when --config is not given; it may be absent.
const DefaultConfigFile = "/etc/k1m/config.yaml"

// ApplyFile sets, from the YAML file at path, every flag of fs that the
// command line did not set: the file's keys are the flag names, so flags
// win and both are parsed and checked alike. A missing file is an error
// only when explicit is true.
func ApplyFile(fs *pflag.FlagSet, path string, explicit bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	var values map[string]interface{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("--config %s: not valid YAML: %w", path, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		flag := fs.Lookup(key)
		if flag == nil || key == "config" {
			return fmt.Errorf("--config %s: unknown key %q; the keys are the flag names: %s", path, key, flagNames(fs))
		}
		if flag.Changed {
			continue // the command line wins
		}
		if err := setFromFile(fs, key, values[key]); err != nil {
			return fmt.Errorf("--config %s: key %s: %w", path, key, err)
		}
	}
	return nil
}

// setFromFile sets one flag from a YAML value. A list given to a
// repeatable flag (a pass-through --COMPONENT-arg) sets one value per
// item, so that values holding commas stay whole.
func setFromFile(fs *pflag.FlagSet, key string, v interface{}) error {
	if list, ok := v.([]interface{}); ok && fs.Lookup(key).Value.Type() == "stringArray" {
		for _, item := range list {
			value, err := flagValue(item)
			if err != nil {
				return err
			}
			if err := fs.Set(key, value); err != nil {
				return err
			}
		}
		return nil
	}
	value, err := flagValue(v)
	if err != nil {
		return err
	}
	return fs.Set(key, value)
}

// flagValue renders a YAML value the way the flag would be written.
func flagValue(v interface{}) (string, error) {
	switch v := v.(type) {
	case string, bool, float64, int64, int:
		return fmt.Sprint(v), nil
	case []interface{}:
		parts := make([]string, len(v))
		for i, item := range v {
			s, err := flagValue(item)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case nil:
		return "", fmt.Errorf("has no value")
	default:
		return "", fmt.Errorf("want a string, number, boolean or list, got %T", v)
	}
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
