// Package debian makes Debian bookworm root file systems with debootstrap
// (the userland of k1m's test images and of its kind base image) and picks
// packages' files out of one (the userland of a small image). Its
// packages.env is the one home of the package lists k1m's nodes run with:
// the shell scripts source it, Go reads it with Packages.
package debian

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Key names a root file system after what goes into it.
func Key(packages []string) string {
	sum := sha256.Sum256([]byte("bookworm minbase " + strings.Join(packages, ",")))
	return hex.EncodeToString(sum[:])[:12]
}

// Bootstrap makes root (bookworm, minbase, plus packages) unless a finished
// one is there; it builds in a temporary directory so a stopped run leaves
// nothing half made behind. label prefixes the progress lines.
func Bootstrap(root string, packages []string, mirror, label string, log io.Writer) error {
	done := root + ".complete"
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap not found: install it (make deps-conformance, or apt-get install debootstrap)")
	}
	tmp := root + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	fmt.Fprintf(log, "%s: debootstrap bookworm with %s from %s (about a minute)\n", label, strings.Join(packages, ","), mirror)
	cmd := exec.Command("debootstrap", "--variant=minbase", "--include="+strings.Join(packages, ","), "bookworm", tmp, mirror)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("debootstrap bookworm into %s: %w (is %s reachable?)", tmp, err, mirror)
	}
	// Downloaded packages and indexes are not part of an image.
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*", "var/log/*.log", "var/cache/debconf/*-old"} {
		matches, _ := filepath.Glob(filepath.Join(tmp, glob))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	if err := os.Rename(tmp, root); err != nil {
		return err
	}
	return os.WriteFile(done, nil, 0o644)
}

// Closure is packages plus everything they depend on (Depends and
// Pre-Depends, first alternative), as installed in root.
func Closure(root string, packages []string) ([]string, error) {
	deps, err := installedDepends(root)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var walk func(string) error
	walk = func(p string) error {
		if seen[p] {
			return nil
		}
		d, ok := deps[p]
		if !ok {
			return fmt.Errorf("package %s is not installed in %s", p, root)
		}
		seen[p] = true
		for _, dep := range d {
			if err := walk(dep); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range packages {
		if err := walk(p); err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// installedDepends reads dpkg's status file: each installed package and
// the packages it needs.
func installedDepends(root string) (map[string][]string, error) {
	f, err := os.Open(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{}
	provides := map[string]string{}
	var name string
	var needs []string
	var installed bool
	flush := func() {
		if name != "" && installed {
			deps[name] = needs
		}
		name, needs, installed = "", nil, false
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		key, value, _ := strings.Cut(line, ": ")
		switch key {
		case "":
			if line == "" {
				flush()
			}
		case "Package":
			name = value
		case "Status":
			installed = strings.HasSuffix(value, " installed")
		case "Depends", "Pre-Depends":
			needs = append(needs, parseDepends(value)...)
		case "Provides":
			for _, p := range parseDepends(value) {
				provides[p] = name
			}
		}
	}
	flush()
	// A dependency on a virtual package means its provider.
	for p, list := range deps {
		for i, d := range list {
			if _, ok := deps[d]; !ok {
				if real, ok := provides[d]; ok {
					list[i] = real
				}
			}
		}
		deps[p] = list
	}
	return deps, sc.Err()
}

// parseDepends turns "libc6 (>= 2.34), libfoo1 | libbar1, netbase" into
// the package names, the first of each alternative.
func parseDepends(value string) []string {
	var out []string
	for _, clause := range strings.Split(value, ",") {
		first, _, _ := strings.Cut(clause, "|")
		name := strings.Fields(first)
		if len(name) == 0 {
			continue
		}
		n, _, _ := strings.Cut(name[0], ":") // libfoo:any
		out = append(out, n)
	}
	return out
}

// Files lists the regular files and symbolic links the packages installed
// in root (dpkg's *.list files): path in the tree -> file on disk, and
// path -> link target. Directories are left to the image writer.
func Files(root string, packages []string) (files, symlinks map[string]string, err error) {
	files, symlinks = map[string]string{}, map[string]string{}
	for _, p := range packages {
		list, err := listFile(root, p)
		if err != nil {
			return nil, nil, err
		}
		for _, listed := range list {
			path, err := canonical(root, listed)
			if err != nil {
				continue // diverted or removed since
			}
			disk := filepath.Join(root, path)
			fi, err := os.Lstat(disk)
			if err != nil {
				continue // diverted or removed since
			}
			switch {
			case fi.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(disk)
				if err != nil {
					return nil, nil, err
				}
				symlinks[path] = target
			case fi.Mode().IsRegular():
				files[path] = disk
			}
		}
	}
	return files, symlinks, nil
}

// canonical resolves the directories of path inside root, so a file
// listed under /lib of a merged-/usr tree is named by its /usr/lib path
// (a layer must not hold files under a path that is a symlink).
func canonical(root, path string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Join(root, filepath.Dir(path)))
	if err != nil {
		return "", err
	}
	absRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absRoot, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%s leaves %s", path, root)
	}
	return filepath.Join("/", rel, filepath.Base(path)), nil
}

func listFile(root, pkg string) ([]string, error) {
	var data []byte
	var err error
	for _, name := range []string{pkg + ".list", pkg + ":amd64.list"} {
		if data, err = os.ReadFile(filepath.Join(root, "var/lib/dpkg/info", name)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("no dpkg file list for %s in %s", pkg, root)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && line != "/." {
			out = append(out, line)
		}
	}
	return out, nil
}
