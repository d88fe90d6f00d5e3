package config

import (
	"fmt"

	"github.com/spf13/pflag"
)

// RenamedFlags maps each flag name earlier releases used to its current
// name: the second etcd was called "ephemeral" in flags before it was
// called "no-fsync" everywhere. The old names keep working, hidden and
// with a deprecation warning, on the command line and in the config file.
var RenamedFlags = map[string]string{
	"ephemeral-data-dir":           "no-fsync-data-dir",
	"ephemeral-etcd-port":          "no-fsync-etcd-port",
	"ephemeral-datastore-endpoint": "no-fsync-datastore-endpoint",
}

// AddRenamedFlags adds to fs, for each renamed flag whose current name fs
// has, the old name as a deprecated alias sharing the current flag's
// value.
func AddRenamedFlags(fs *pflag.FlagSet) {
	for old, current := range RenamedFlags {
		f := fs.Lookup(current)
		if f == nil || fs.Lookup(old) != nil {
			continue
		}
		fs.AddFlag(&pflag.Flag{Name: old, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue})
		if err := fs.MarkDeprecated(old, fmt.Sprintf("use --%s", current)); err != nil {
			panic(err) // the flag was added just above
		}
	}
}
