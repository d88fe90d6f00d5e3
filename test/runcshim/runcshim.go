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
	"strings"
)

// Capability is the one the shim removes.
const Capability = "CAP_SYS_RESOURCE"

// capabilitySets are the OCI process.capabilities lists.
var capabilitySets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

// SpecFile is the JSON file a runc call takes capabilities from ("" for
// calls that start no process): create and run read the bundle's
// config.json (--bundle/-b, else the working directory), exec reads its
// --process/-p file (docker exec --privileged asks for every capability).
func SpecFile(args []string) string {
	command, bundle, process := "", ".", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--bundle" || a == "-b":
			bundle = value()
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		case a == "--process" || a == "-p":
			process = value()
		case strings.HasPrefix(a, "--process="):
			process = strings.TrimPrefix(a, "--process=")
		case command == "" && (a == "create" || a == "run" || a == "exec"):
			command = a
		}
	}
	switch {
	case command == "create" || command == "run":
		return filepath.Join(bundle, "config.json")
	case command == "exec" && process != "":
		return process
	}
	return ""
}

// DropCapability removes name from every capability set of an OCI config
// or of a process spec (runc exec --process); the other fields are kept as
// they are. It reports whether it changed anything.
func DropCapability(config []byte, name string) ([]byte, bool, error) {
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(config, &spec); err != nil {
		return nil, false, fmt.Errorf("reading the OCI config: %w", err)
	}
	if _, isProcess := spec["capabilities"]; isProcess {
		return dropFromProcess(spec, name)
	}
	var process map[string]json.RawMessage
	if raw, ok := spec["process"]; !ok || json.Unmarshal(raw, &process) != nil {
		return config, false, nil
	}
	out, changed, err := dropFromProcess(process, name)
	if err != nil || !changed {
		return config, false, err
	}
	spec["process"] = out
	out, err = json.Marshal(spec)
	return out, true, err
}

// dropFromProcess removes name from a process spec's capability sets.
func dropFromProcess(process map[string]json.RawMessage, name string) ([]byte, bool, error) {
	var caps map[string][]string
	if raw, ok := process["capabilities"]; !ok || json.Unmarshal(raw, &caps) != nil {
		return nil, false, nil
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
		return nil, false, nil
	}
	var err error
	if process["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, false, err
	}
	out, err := json.Marshal(process)
	return out, true, err
}

// Rewrite drops Capability from the spec file at path, in place.
func Rewrite(path string) error {
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
