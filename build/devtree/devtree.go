// Package devtree turns the patch series into a git repository for editing
// and back: the first commit holds the pristine modules, then one commit per
// patch whose message is the patch file name and header. Developers edit
// the series with ordinary git (amend, rebase, new commits) and export it.
package devtree

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/build/apply"
	"k1m.dev/k1m/build/series"
)

const pristineSubject = "pristine modules"

// Create fills dir (which must not exist) with the pristine modules and
// commits each patch. When a patch does not apply, it stops with the
// rejects in dir and tells the developer how to continue.
func Create(dir string, mods []apply.Module, patches []series.Patch, log io.Writer) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists: pick a new directory, or use --continue to resume a stopped devtree", dir)
	}
	if _, err := apply.BuildTree(dir, mods, nil, log); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, ".k1m-series-stamp")); err != nil {
		return err
	}
	if err := git(dir, "init", "-q"); err != nil {
		return err
	}
	if err := commitAll(dir, pristineSubject+"\n\n"+moduleList(mods)); err != nil {
		return err
	}
	return Continue(dir, patches, log)
}

// Continue commits the patches the devtree does not have yet, in order.
// Uncommitted changes in dir are taken as the developer's fix of the first
// patch that is missing, and committed as that patch.
func Continue(dir string, patches []series.Patch, log io.Writer) error {
	done, err := committedPatches(dir)
	if err != nil {
		return err
	}
	if err := commitFix(dir, patches, done); err != nil {
		return err
	}
	for _, p := range patches {
		if done[p.Name] {
			continue
		}
		fmt.Fprintf(log, "  apply  %s\n", p.Name)
		if out, err := apply.PatchCommand(dir, p).CombinedOutput(); err != nil {
			return fmt.Errorf("%s does not apply:\n%s\nFix the files in %s by hand (the .rej files hold the hunks that failed), "+
				"delete the .rej files, then run k1m-build devtree --dir %s --continue",
				p.Name, indent(string(out)), dir, dir)
		}
		if err := commitAll(dir, Message(p)); err != nil {
			return err
		}
	}
	return nil
}

// Message is the commit message of a patch: its file name, then its header.
func Message(p series.Patch) string {
	return p.Name + "\n\n" + string(p.Raw) + "\n"
}

// Export writes one patch file per commit after the pristine one into
// patchDir, and patchDir/series in commit order. The commit message body
// is the header.
func Export(dir, patchDir string) ([]string, error) {
	out, err := gitOutput(dir, "log", "--reverse", "--format=%H", "HEAD")
	if err != nil {
		return nil, err
	}
	commits := strings.Fields(out)
	if len(commits) < 2 {
		return nil, fmt.Errorf("%s has no patch commits after the pristine one", dir)
	}
	var names []string
	for _, c := range commits[1:] {
		msg, err := gitOutput(dir, "log", "-1", "--format=%B", c)
		if err != nil {
			return nil, err
		}
		name, header, _ := strings.Cut(strings.TrimSpace(msg), "\n")
		name = strings.TrimSpace(name)
		if !strings.HasSuffix(name, ".patch") {
			return nil, fmt.Errorf("commit %.12s: the subject %q is not a patch file name (NNNN-what.patch)", c, name)
		}
		diff, err := gitOutput(dir, "diff", "--src-prefix=a/", "--dst-prefix=b/", "--no-color", c+"~1", c)
		if err != nil {
			return nil, err
		}
		content := strings.TrimSpace(header) + "\n---\n" + diff
		if err := os.WriteFile(filepath.Join(patchDir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, os.WriteFile(filepath.Join(patchDir, "series"), []byte(strings.Join(names, "\n")+"\n"), 0o644)
}

// commitFix commits uncommitted changes as the first missing patch.
func commitFix(dir string, patches []series.Patch, done map[string]bool) error {
	status, err := gitOutput(dir, "status", "--porcelain")
	if err != nil || strings.TrimSpace(status) == "" {
		return err
	}
	if strings.Contains(status, ".rej") {
		return fmt.Errorf("%s still holds .rej files: finish the fix and delete them first", dir)
	}
	for _, p := range patches {
		if !done[p.Name] {
			done[p.Name] = true
			return commitAll(dir, Message(p))
		}
	}
	return fmt.Errorf("%s has uncommitted changes but every patch is committed: commit them yourself (subject: the new patch file name, body: its header)", dir)
}

func committedPatches(dir string) (map[string]bool, error) {
	out, err := gitOutput(dir, "log", "--format=%s", "HEAD")
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, s := range strings.Split(out, "\n") {
		done[strings.TrimSpace(s)] = true
	}
	return done, nil
}

func commitAll(dir, msg string) error {
	if err := git(dir, "add", "-A"); err != nil {
		return err
	}
	cmd := exec.Command("git", "-C", dir, "-c", "user.name=k1m devtree", "-c", "user.email=devtree@k1m.dev",
		"commit", "-q", "--allow-empty", "-F", "-")
	cmd.Stdin = strings.NewReader(msg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git commit in %s: %v\n%s", dir, err, out)
	}
	return nil
}

func git(dir string, args ...string) error {
	_, err := gitOutput(dir, args...)
	return err
}

func gitOutput(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out), nil
}

func moduleList(mods []apply.Module) string {
	var b strings.Builder
	for _, m := range mods {
		fmt.Fprintf(&b, "%s %s\n", m.Path, m.Version)
	}
	return b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}
