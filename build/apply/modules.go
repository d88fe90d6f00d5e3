package apply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"

	"k1m.dev/k1m/pkg/fsutil"
)

// Module is one Go module of the build list.
type Module struct {
	Path    string
	Version string
	Dir     string // pristine source in the module cache, filled by Download
}

// BuildList lists the modules the main module in dir builds with (after its
// replace directives), so a patch path can be matched to its module.
func BuildList(dir string) ([]Module, error) {
	cmd := exec.Command("go", "list", "-m", "-json", "all")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m all in %s: %w%s", dir, err, stderrOf(err))
	}
	var mods []Module
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m struct {
			Path, Version string
			Main          bool
			Replace       *struct{ Path, Version string }
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if m.Main {
			continue
		}
		mod := Module{Path: m.Path, Version: m.Version}
		if m.Replace != nil && m.Replace.Version != "" {
			mod.Version = m.Replace.Version
		}
		mods = append(mods, mod)
	}
	return mods, nil
}

// ModuleOf returns the module a patch path (k8s.io/apiserver/pkg/x.go)
// belongs to: the build-list module with the longest matching path.
func ModuleOf(mods []Module, file string) (Module, error) {
	var best Module
	for _, m := range mods {
		if strings.HasPrefix(file, m.Path+"/") && len(m.Path) > len(best.Path) {
			best = m
		}
	}
	if best.Path == "" {
		return Module{}, fmt.Errorf("%s is in no module k1m builds with: patch paths start with a module path, e.g. k8s.io/apiserver/pkg/...", file)
	}
	return best, nil
}

// Download fetches m into the module cache and records its directory.
func Download(m *Module) error {
	out, err := exec.Command("go", "mod", "download", "-json", m.Path+"@"+m.Version).Output()
	if err != nil {
		return fmt.Errorf("go mod download %s@%s: %w%s", m.Path, m.Version, err, stderrOf(err))
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return err
	}
	if info.Error != "" {
		return fmt.Errorf("go mod download %s@%s: %s", m.Path, m.Version, info.Error)
	}
	m.Dir = info.Dir
	return nil
}

// copyTree copies a module cache directory (read-only files) into dst as a
// writable tree.
func copyTree(src, dst string) error {
	return fsutil.CopyTree(src, dst, func(string) os.FileMode { return 0o644 })
}

func sortedModules(set map[string]Module) []Module {
	mods := make([]Module, 0, len(set))
	for _, m := range set {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	return mods
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}
