// Package apply builds the patched source tree: pristine copies of the
// modules the series touches, with every patch applied in order, and a
// go.work that points the build at them. It never leaves a half-patched tree:
// patches are applied to a fresh tree that replaces the old one only when
// every patch applied.
package apply

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/build/series"
)

// stampFile records what a patched tree was made from; an unchanged stamp
// means the tree is up to date and is kept (so Go's build cache stays warm).
const stampFile = ".k1m-series-stamp"

// formatVersion changes when the way trees are made changes.
const formatVersion = "k1m-apply/1"

// Result says what Prepare did.
type Result struct {
	Modules []Module // the patched modules, sorted by path
	Reused  bool     // the tree was already up to date
}

// Prepare makes outDir/src hold the patched modules and outDir/go.work point
// the main module (mainDir) at them. Progress goes to log.
func Prepare(mainDir, outDir string, patches []series.Patch, log io.Writer) (Result, error) {
	mods, err := TouchedModules(mainDir, patches)
	if err != nil {
		return Result{}, err
	}
	reused, err := BuildTree(filepath.Join(outDir, "src"), mods, patches, log)
	if err != nil {
		return Result{}, err
	}
	return Result{Modules: mods, Reused: reused}, WriteWorkspace(mainDir, outDir, mods)
}

// BuildTree makes srcDir hold a copy of each module (from its Dir) with the
// patches applied in order. An up-to-date tree is kept (reused is true). A
// patch that fails leaves srcDir as it was.
func BuildTree(srcDir string, mods []Module, patches []series.Patch, log io.Writer) (reused bool, err error) {
	stamp := stampOf(mods, patches)
	if old, err := os.ReadFile(filepath.Join(srcDir, stampFile)); err == nil && string(old) == stamp {
		return true, nil
	}
	parent := filepath.Dir(srcDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(parent, "src.new-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp) // gone on success too: it has been renamed by then
	for _, m := range mods {
		fmt.Fprintf(log, "  copy   %s@%s\n", m.Path, m.Version)
		if err := copyTree(m.Dir, filepath.Join(tmp, m.Path)); err != nil {
			return false, fmt.Errorf("copying %s: %w", m.Path, err)
		}
	}
	for _, p := range patches {
		fmt.Fprintf(log, "  apply  %s\n", p.Name)
		if err := applyOne(tmp, p, mods); err != nil {
			return false, err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, stampFile), []byte(stamp), 0o644); err != nil {
		return false, err
	}
	return false, swap(tmp, srcDir)
}

// TouchedModules finds and downloads the modules the series touches.
func TouchedModules(mainDir string, patches []series.Patch) ([]Module, error) {
	list, err := BuildList(mainDir)
	if err != nil {
		return nil, err
	}
	set := map[string]Module{}
	for _, p := range patches {
		for _, f := range p.Files {
			m, err := ModuleOf(list, f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			set[m.Path] = m
		}
	}
	mods := sortedModules(set)
	for i := range mods {
		if err := Download(&mods[i]); err != nil {
			return nil, err
		}
	}
	return mods, nil
}

func stampOf(mods []Module, patches []series.Patch) string {
	h := sha256.New()
	fmt.Fprintln(h, formatVersion)
	for _, m := range mods {
		fmt.Fprintln(h, m.Path, m.Version)
	}
	for _, p := range patches {
		fmt.Fprintln(h, p.Name, len(p.Diff))
		h.Write(p.Diff)
	}
	return hex.EncodeToString(h.Sum(nil)) + "\n"
}

// applyOne applies one patch with GNU patch, without fuzz: context must
// match exactly (offsets are fine), so a patch that no longer fits fails
// instead of landing in the wrong place.
func applyOne(dir string, p series.Patch, mods []Module) error {
	out, err := PatchCommand(dir, p, "--reject-file=-").CombinedOutput()
	if err == nil {
		return nil
	}
	if _, notFound := err.(*exec.Error); notFound {
		return fmt.Errorf("GNU patch is needed to apply the series (apt-get install patch): %w", err)
	}
	return &ApplyError{Patch: p.Name, Output: string(out), Modules: mods}
}

// PatchCommand is GNU patch applying p in dir: strict (no fuzz), never
// reversing a patch, no backup files. The series is applied this way
// everywhere, so a patch that applies in a devtree applies in the build.
func PatchCommand(dir string, p series.Patch, extra ...string) *exec.Cmd {
	args := append([]string{"-p1", "--batch", "--forward", "--fuzz=0", "--no-backup-if-mismatch", "-d", dir}, extra...)
	cmd := exec.Command("patch", args...)
	cmd.Stdin = bytes.NewReader(p.Diff)
	return cmd
}

// ApplyError is a patch that does not apply; Output is GNU patch's report,
// which names each file and failed hunk.
type ApplyError struct {
	Patch   string
	Output  string
	Modules []Module
}

func (e *ApplyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "patch %s does not apply to", e.Patch)
	for _, m := range e.Modules {
		fmt.Fprintf(&b, " %s@%s", m.Path, m.Version)
	}
	b.WriteString(":\n")
	for _, line := range strings.Split(strings.TrimSpace(e.Output), "\n") {
		if strings.Contains(line, "saving rejects to file -") {
			line = strings.Replace(line, " -- saving rejects to file -", "", 1)
		}
		b.WriteString("    " + line + "\n")
	}
	b.WriteString("Nothing was changed: the previous patched tree (if any) is untouched.\n" +
		"Rebase the patch on the pinned modules (docs/patches.md, 'Rebasing the series').")
	return b.String()
}

// swap replaces dst with the fresh tree src as atomically as rename allows.
func swap(src, dst string) error {
	old := dst + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if _, err := os.Stat(dst); err == nil {
		if err := os.Rename(dst, old); err != nil {
			return err
		}
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	return os.RemoveAll(old)
}
