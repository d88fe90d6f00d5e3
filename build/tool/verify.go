package tool

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/build/apply"
	"k1m.dev/k1m/build/codegen"
	"k1m.dev/k1m/build/series"
)

// checkCodegen re-runs the generators each patch declares (its Codegen
// field) on the patched tree in outDir and fails if any generated file
// changes: generated code in the series must be exactly what the
// generators of the pinned code-generator produce.
func checkCodegen(root, outDir string, patches []series.Patch, mods []apply.Module, stdout io.Writer) error {
	goWork, err := filepath.Abs(filepath.Join(outDir, "go.work"))
	if err != nil {
		return err
	}
	dirOf := func(pkg string) (string, error) {
		m, err := apply.ModuleOf(mods, pkg+"/")
		if err != nil {
			return "", fmt.Errorf("Codegen names %s, which is in no patched module", pkg)
		}
		return filepath.Join(outDir, "src", pkg[:len(m.Path)], pkg[len(m.Path):]), nil
	}
	header := ""
	for _, m := range mods {
		if m.Path == "k8s.io/kubernetes" {
			header = filepath.Join(outDir, "src", m.Path, "hack", "boilerplate", "boilerplate.generatego.txt")
		}
	}
	for _, p := range patches {
		runs, err := codegen.ParseField(p.Header["Codegen"])
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if len(runs) == 0 {
			continue
		}
		if header == "" {
			return fmt.Errorf("%s: Codegen needs the k8s.io/kubernetes boilerplate header, but the series does not patch k8s.io/kubernetes", p.Name)
		}
		fmt.Fprintf(stdout, "k1m-build: re-running the generators %s declares\n", p.Name)
		changed, err := codegen.Check(root, goWork, header, runs, dirOf)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if len(changed) > 0 {
			return fmt.Errorf("%s: generated code differs from what the generators produce:\n  %s\nregenerate it and refresh the patch (docs/patches.md)",
				p.Name, strings.Join(changed, "\n  "))
		}
	}
	return nil
}

// testPatched runs `go test` on every package the series touches, on the
// patched tree: upstream's tests of those packages and the patches' own.
func (p project) testPatched(stdout io.Writer) error {
	patches, err := p.series()
	if err != nil {
		return err
	}
	pkgs := touchedPackages(patches)
	fmt.Fprintf(stdout, "k1m-build: testing %d packages the series touches, on the patched tree\n", len(pkgs))
	qs := quarantinedIn(pkgs)
	// -skip applies to every package of a go test run: the packages
	// holding quarantined tests run apart, so that a test of the same name
	// elsewhere still runs.
	withQuarantine, rest := splitQuarantined(pkgs, qs)
	skip, err := skipPattern(qs, withQuarantine, func(pkg string) ([]string, error) {
		return testFuncsIn(filepath.Join(p.out, "src", pkg))
	})
	if err != nil {
		return err
	}
	for _, q := range qs {
		fmt.Fprintf(stdout, "k1m-build: not running quarantined %s %s: %s\n", q.Package, q.Test, q.Reason)
	}
	if len(rest) > 0 {
		if err := p.runTestsRetryingFlakes(rest, "", stdout); err != nil {
			return err
		}
	}
	if len(withQuarantine) == 0 {
		return nil
	}
	return p.runTestsRetryingFlakes(withQuarantine, skip, stdout)
}
