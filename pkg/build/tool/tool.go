// Package tool implements the k1m-build subcommands.
package tool

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"k1m.dev/k1m/pkg/build/apply"
	"k1m.dev/k1m/pkg/build/pins"
	"k1m.dev/k1m/pkg/build/series"
	"k1m.dev/k1m/pkg/build/stamp"
)

const usage = `usage: k1m-build COMMAND [flags]

Commands:
  prepare    apply patches/ to pristine module copies in OUT/src and write OUT/go.work
  build      prepare (k1m flavour) and build every binary into --bin (--flavor k1m|stock)
  go         run a go command in a flavour's environment: k1m-build go [--flavor k1m|stock] vet ./...
  ldflags    print the -ldflags that stamp a binary's version (--flavor k1m|stock)
  images     build the image archives a cluster imports (pause, CoreDNS, busybox) into OUT/images
  conformance  build e2e.test, ginkgo, the conformance image and the test images into OUT/conformance
  kind-tools build the kind CLI, k1m-docker-runc, k1m-cni, etcd and crictl into OUT/kind/bin
  kind-image build the kind base and node images and load them into Docker (cached by inputs)
  verify     check pins, patch headers, and that the series applies to pristine sources
  packages   list the Go packages the series touches (their tests run in make verify)
  test-patched  run the tests of those packages on the patched tree (OUT/go.work)
  devtree    make a git repository (--dir) with the pristine modules and one commit per patch
             (--continue resumes after fixing a patch that did not apply)
  export     write patches/ and patches/series back from a devtree's commits (--dir)

Common flags: --root DIR (the k1m checkout, default .), --out DIR (default ROOT/_output)`

// Main runs one subcommand.
func Main(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the k1m checkout")
	out := fs.String("out", "", "where generated trees go (default ROOT/_output)")
	flavor := fs.String("flavor", "k1m", "with ldflags and build: k1m or stock")
	dir := fs.String("dir", "", "with devtree and export: the devtree directory")
	cont := fs.Bool("continue", false, "with devtree: resume a devtree that stopped at a patch")
	bin := fs.String("bin", "", "with build: where binaries go (default OUT/bin, or OUT/stock/bin for stock)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 && args[0] != "go" {
		return fmt.Errorf("%s takes no arguments, got %q", args[0], fs.Args())
	}
	if *out == "" {
		*out = filepath.Join(*root, "_output")
	}
	p := project{root: *root, out: *out, log: stderr, prepared: new(bool)}
	switch args[0] {
	case "prepare":
		return p.prepare()
	case "build":
		if *bin == "" {
			*bin = filepath.Join(*out, "bin")
			if stamp.Flavor(*flavor) == stamp.Stock {
				*bin = filepath.Join(*out, "stock", "bin")
			}
		}
		return p.build(stamp.Flavor(*flavor), *bin)
	case "ldflags":
		return p.ldflags(stamp.Flavor(*flavor), stdout)
	case "images":
		return p.images()
	case "conformance":
		return p.conformance()
	case "kind-tools":
		return p.kindTools()
	case "kind-image":
		return p.kindImage()
	case "verify":
		return p.verify(stdout)
	case "packages":
		return p.packages(stdout)
	case "test-patched":
		return p.testPatched(stdout)
	case "go":
		return p.goCommand(stamp.Flavor(*flavor), fs.Args(), stdout)
	case "devtree", "export":
		if *dir == "" {
			return fmt.Errorf("%s needs --dir DIR", args[0])
		}
		if args[0] == "export" {
			return p.export(*dir, stdout)
		}
		return p.devtree(*dir, *cont)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}

type project struct {
	root, out string
	log       io.Writer
	prepared  *bool // the patched tree is ready: one prepare per k1m-build run
}

func (p project) pins() (pins.Pins, error) {
	return pins.Load(filepath.Join(p.root, "build", "versions.env"))
}

func (p project) series() ([]series.Patch, error) {
	return series.Load(filepath.Join(p.root, "patches"))
}

func (p project) prepare() error {
	if p.prepared != nil && *p.prepared {
		return nil
	}
	patches, err := p.checkedSeries()
	if err != nil {
		return err
	}
	fmt.Fprintf(p.log, "k1m-build: applying %d patches from patches/series\n", len(patches))
	res, err := apply.Prepare(p.root, p.out, patches, p.log)
	if err != nil {
		return err
	}
	if res.Reused {
		fmt.Fprintf(p.log, "k1m-build: %s/src is up to date with the series\n", p.out)
	}
	if p.prepared != nil {
		*p.prepared = true
	}
	return nil
}

// checkedSeries loads the series and refuses it if a header is incomplete.
func (p project) checkedSeries() ([]series.Patch, error) {
	patches, err := p.series()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, pt := range patches {
		errs = append(errs, pt.CheckHeader()...)
	}
	return patches, errors.Join(errs...)
}

func (p project) ldflags(flavor stamp.Flavor, stdout io.Writer) error {
	flags, err := p.ldflagsFor(flavor)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, flags)
	return nil
}

func (p project) ldflagsFor(flavor stamp.Flavor) (string, error) {
	pn, err := p.pins()
	if err != nil {
		return "", err
	}
	kv, err := pn.Get("KUBERNETES_VERSION")
	if err != nil {
		return "", err
	}
	info, err := stamp.Compute(flavor, kv, stamp.ReadCommit(p.root))
	if err != nil {
		return "", err
	}
	return info.LDFlags(), nil
}

func (p project) verify(stdout io.Writer) error {
	var errs []error
	if err := p.checkPins(); err != nil {
		errs = append(errs, err)
	}
	patches, err := p.checkedSeries()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Apply to a scratch directory, so the check proves the series applies
	// to pristine sources whatever state OUT/src is in.
	scratch, err := os.MkdirTemp("", "k1m-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	res, err := apply.Prepare(p.root, scratch, patches, io.Discard)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "k1m-build: %d patches have complete headers and apply to pristine sources; pins agree with go.mod\n", len(patches))
	if err := checkCodegen(p.root, scratch, patches, res.Modules, stdout); err != nil {
		return err
	}
	return nil
}

// checkPins fails when go.mod builds a module at another version than
// build/versions.env pins.
func (p project) checkPins() error {
	pn, err := p.pins()
	if err != nil {
		return err
	}
	mods, err := apply.BuildList(p.root)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mods {
		if want, ok := pn.ModuleVersion(m.Path); ok && m.Version != want {
			errs = append(errs, fmt.Errorf("go.mod builds %s at %s but build/versions.env pins %s: change one to match the other", m.Path, m.Version, want))
		}
	}
	return errors.Join(errs...)
}

func (p project) packages(stdout io.Writer) error {
	patches, err := p.series()
	if err != nil {
		return err
	}
	for _, pkg := range touchedPackages(patches) {
		fmt.Fprintln(stdout, pkg)
	}
	return nil
}

// touchedPackages lists the Go packages whose files the series changes.
func touchedPackages(patches []series.Patch) []string {
	set := map[string]bool{}
	for _, pt := range patches {
		for _, f := range pt.Files {
			switch {
			case strings.HasSuffix(f, ".go"):
				set[path.Dir(f)] = true
			case strings.Contains(f, "/testdata/"):
				// Golden files belong to the package above testdata/.
				set[f[:strings.Index(f, "/testdata/")]] = true
			}
		}
	}
	pkgs := make([]string, 0, len(set))
	for pkg := range set {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	return pkgs
}
