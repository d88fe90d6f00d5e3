// Package runcshim lets Docker start --privileged containers (kind's nodes)
// on a host whose root lacks CAP_SYS_RESOURCE: runc refuses to grant a
// capability its caller does not hold ("unable to apply caps"), so the
// shim drops that one capability from the container's OCI config before
// handing the call to the real runc. Nothing else in the config changes.
package runcshim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Capability is the one the shim removes.
const Capability = "CAP_SYS_RESOURCE"

// capabilitySets are the OCI process.capabilities lists.
var capabilitySets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

// BundleDir is the OCI bundle of a runc create or run call ("" for other
// calls): --bundle/-b, or the working directory, as runc itself decides.
func BundleDir(args []string) string {
	command, bundle := "", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--bundle" || a == "-b":
			if i+1 < len(args) {
				bundle = args[i+1]
				i++
			}
		case len(a) > 9 && a[:9] == "--bundle=":
			bundle = a[9:]
		case command == "" && (a == "create" || a == "run"):
			command = a
		}
	}
	if command == "" {
		return ""
	}
	if bundle == "" {
		bundle = "."
	}
	return bundle
}

// DropCapability removes name from every capability set of an OCI config;
// the other fields are kept as they are. It reports whether it changed.
func DropCapability(config []byte, name string) ([]byte, bool, error) {
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(config, &spec); err != nil {
		return nil, false, fmt.Errorf("reading the OCI config: %w", err)
	}
	var process map[string]json.RawMessage
	if raw, ok := spec["process"]; !ok || json.Unmarshal(raw, &process) != nil {
		return config, false, nil
	}
	var caps map[string][]string
	if raw, ok := process["capabilities"]; !ok || json.Unmarshal(raw, &caps) != nil {
		return config, false, nil
	}
	changed := false
	for _, set := range capabilitySets {
		kept := caps[set][:0:0]
		for _, c := range caps[set] {
			if c == name {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		if caps[set] != nil {
			caps[set] = kept
		}
	}
	if !changed {
		return config, false, nil
	}
	var err error
	if process["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, false, err
	}
	if spec["process"], err = json.Marshal(process); err != nil {
		return nil, false, err
	}
	out, err := json.Marshal(spec)
	return out, true, err
}

// RewriteBundle drops Capability from the bundle's config.json in place.
func RewriteBundle(bundle string) error {
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, changed, err := DropCapability(raw, Capability)
	if err != nil || !changed {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}
