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
	"slices"
	"sort"
	"strings"

	"k1m.dev/k1m/build/apply"
	"k1m.dev/k1m/build/layout"
	"k1m.dev/k1m/build/pins"
	"k1m.dev/k1m/build/series"
	"k1m.dev/k1m/build/stamp"
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
  bench-tools  build bench/cmd/benchplot into OUT/tools
  verify     check pins, patch headers, and that the series applies to pristine sources
  packages   list the Go packages the series touches (their tests run in make verify)
  test-patched  run the tests of those packages on the patched tree (OUT/go.work)
  devtree    make a git repository (--dir) with the pristine modules and one commit per patch
             (--continue resumes after fixing a patch that did not apply)
  export     write patches/ and patches/series back from a devtree's commits (--dir)

Every command takes --root DIR (the k1m checkout, default .) and --out DIR (default
ROOT/_output), and only the flags named above for it: another is an error.`

// options are every flag any subcommand takes; each subcommand registers
// only its own (commands), so a flag given to the wrong one is an error
// instead of being ignored.
type options struct {
	root, out, flavor, dir, bin string
	cont                        bool
}

// Flags a subcommand may take besides --root and --out.
const (
	flagFlavor   = "flavor"
	flagBin      = "bin"
	flagDir      = "dir"
	flagContinue = "continue"
)

type command struct {
	flags []string
	args  bool // takes arguments (go)
	run   func(p project, o *options, args []string, stdout io.Writer) error
}

var commands = map[string]command{
	"prepare": {run: func(p project, _ *options, _ []string, _ io.Writer) error { return p.prepare() }},
	"build": {flags: []string{flagFlavor, flagBin}, run: func(p project, o *options, _ []string, _ io.Writer) error {
		bin := o.bin
		if bin == "" {
			bin = filepath.Join(o.out, "bin")
			if stamp.Flavor(o.flavor) == stamp.Stock {
				bin = filepath.Join(o.out, "stock", "bin")
			}
		}
		return p.build(stamp.Flavor(o.flavor), bin)
	}},
	"ldflags": {flags: []string{flagFlavor}, run: func(p project, o *options, _ []string, stdout io.Writer) error {
		return p.ldflags(stamp.Flavor(o.flavor), stdout)
	}},
	"go": {flags: []string{flagFlavor}, args: true, run: func(p project, o *options, args []string, stdout io.Writer) error {
		return p.goCommand(stamp.Flavor(o.flavor), args, stdout)
	}},
	"images":       {run: func(p project, _ *options, _ []string, _ io.Writer) error { return p.images() }},
	"conformance":  {run: func(p project, _ *options, _ []string, _ io.Writer) error { return p.conformance() }},
	"kind-tools":   {run: func(p project, _ *options, _ []string, _ io.Writer) error { return p.kindTools() }},
	"kind-image":   {run: func(p project, _ *options, _ []string, _ io.Writer) error { return p.kindImage() }},
	"bench-tools":  {run: func(p project, _ *options, _ []string, _ io.Writer) error { return p.benchTools() }},
	"verify":       {run: func(p project, _ *options, _ []string, stdout io.Writer) error { return p.verify(stdout) }},
	"packages":     {run: func(p project, _ *options, _ []string, stdout io.Writer) error { return p.packages(stdout) }},
	"test-patched": {run: func(p project, _ *options, _ []string, stdout io.Writer) error { return p.testPatched(stdout) }},
	"devtree": {flags: []string{flagDir, flagContinue}, run: func(p project, o *options, _ []string, _ io.Writer) error {
		if o.dir == "" {
			return fmt.Errorf("devtree needs --dir DIR")
		}
		return p.devtree(o.dir, o.cont)
	}},
	"export": {flags: []string{flagDir}, run: func(p project, o *options, _ []string, stdout io.Writer) error {
		if o.dir == "" {
			return fmt.Errorf("export needs --dir DIR")
		}
		return p.export(o.dir, stdout)
	}},
}

// flagSet has --root, --out and the named flags of one subcommand.
func flagSet(name string, names []string, o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", ".", "the k1m checkout")
	fs.StringVar(&o.out, "out", "", "where generated trees go (default ROOT/_output)")
	for _, n := range names {
		switch n {
		case flagFlavor:
			fs.StringVar(&o.flavor, n, "k1m", "k1m or stock")
		case flagBin:
			fs.StringVar(&o.bin, n, "", "where binaries go (default OUT/bin, or OUT/stock/bin for stock)")
		case flagDir:
			fs.StringVar(&o.dir, n, "", "the devtree directory")
		case flagContinue:
			fs.BoolVar(&o.cont, n, false, "resume a devtree that stopped at a patch")
		}
	}
	return fs
}

// Main runs one subcommand.
func Main(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
	o := &options{flavor: "k1m"}
	fs := flagSet(args[0], cmd.flags, o, stderr)
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if fs.NArg() > 0 && !cmd.args {
		return fmt.Errorf("%s takes no arguments, got %q", args[0], fs.Args())
	}
	if f := stamp.Flavor(o.flavor); f != stamp.K1m && f != stamp.Stock {
		return fmt.Errorf("%s --flavor %q: want k1m or stock", args[0], o.flavor)
	}
	if o.out == "" {
		o.out = filepath.Join(o.root, "_output")
	}
	p := project{root: o.root, out: o.out, log: stderr, prepared: new(bool)}
	return cmd.run(p, o, fs.Args(), stdout)
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
	readme, err := os.ReadFile(filepath.Join(p.root, "README.md"))
	if err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, series.CheckReadmeTable(readme, patches)...)
		layoutErrs, err := layout.CheckReadmeTable(readme, p.root)
		errs = append(append(errs, layoutErrs...), err)
	}
	importErrs, err := layout.CheckProductImports(p.root)
	errs = append(append(errs, importErrs...), err)
	if errs = slices.DeleteFunc(errs, func(e error) bool { return e == nil }); len(errs) > 0 {
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
	fmt.Fprintf(stdout, "k1m-build: %d patches have complete headers, a row each in README.md, and apply to pristine sources; pins agree with go.mod; README names every tree and command; the product imports no tooling\n", len(patches))
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
