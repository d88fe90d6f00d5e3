package conformance

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const usage = `usage: k1m-conformance COMMAND [flags]

Commands:
  run     run the conformance suite in the cluster (as Sonobuoy's e2e plugin does) and
          write the results tarball in Sonobuoy's layout and a summary into --out
  worker  the sidecar of the conformance pod (progress and results hand-off)
  modes   list the modes and their focus and skip expressions`

// Main runs one subcommand; a run with failed specs is an error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		return nil
	}
	switch args[0] {
	case "run":
		return runCommand(ctx, args[1:], stdout, stderr)
	case "worker":
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		fs.SetOutput(stderr)
		listen := fs.String("listen", "localhost:"+ProgressPort, "where e2e.test posts progress")
		results := fs.String("results-dir", ResultsDir, "where go-runner writes the done file")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return Worker(ctx, *listen, *results, stdout)
	case "modes":
		for _, n := range ModeNames() {
			m := Modes[n]
			fmt.Fprintf(stdout, "%s\n  focus: %s\n  skip:  %s\n", n, m.Focus, m.Skip)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// runFlags are run's settings, parsed and checked before anything is created.
type runFlags struct {
	mode, kubeconfig, image, repoList, out, focus, skip string
	parallel, keep                                      bool
	procs                                               int
	timeout                                             time.Duration
}

func parseRunFlags(args []string, stderr io.Writer) (runFlags, Mode, error) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.mode, "mode", "quick", "quick, non-disruptive-conformance, certified-conformance, k1m-curated, netpol (the upstream NetworkPolicy specs) or netpol-curated")
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's kubeconfig")
	fs.StringVar(&f.image, "image", Image, "the conformance image (imported into the nodes)")
	fs.StringVar(&f.repoList, "repo-list", "", "KUBE_TEST_REPO_LIST file naming the test images (Sonobuoy's --e2e-repo-config)")
	fs.StringVar(&f.out, "out", "_output/conformance/results", "where the results go (a folder per run)")
	fs.StringVar(&f.focus, "focus", "", "replace the mode's focus regexp (E2E_FOCUS)")
	fs.StringVar(&f.skip, "skip", "", "replace the mode's skip regexp (E2E_SKIP)")
	fs.BoolVar(&f.parallel, "parallel", false, "run specs in parallel (E2E_PARALLEL; Sonobuoy's modes run serially), then the mode's [Serial] specs one at a time; one merged result")
	fs.IntVar(&f.procs, "procs", 0, "with --parallel: ginkgo processes (E2E_EXTRA_GINKGO_ARGS=--procs=N; default one per CPU). Specs mostly wait, so more processes than CPUs shorten a run")
	fs.BoolVar(&f.keep, "keep", false, "leave the run's namespace and pod after it ends")
	fs.DurationVar(&f.timeout, "timeout", 6*time.Hour, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return f, Mode{}, err
	}
	if fs.NArg() > 0 {
		return f, Mode{}, fmt.Errorf("run takes no arguments, got %q", fs.Args())
	}
	mode, err := ModeNamed(f.mode)
	if err != nil {
		return f, mode, err
	}
	if f.focus != "" {
		mode.Focus, mode.Specs = f.focus, 0
	}
	if f.skip != "" {
		mode.Skip, mode.Specs = f.skip, 0
	}
	for flagName, expr := range map[string]string{"--focus": f.focus, "--skip": f.skip} {
		if _, err := regexp.Compile(expr); err != nil {
			return f, mode, fmt.Errorf("%s %q: not a regular expression ginkgo can use (%v); escape brackets as in '\\[Serial\\]'", flagName, expr, err)
		}
	}
	mode.Parallel = f.parallel
	if f.procs < 0 || (f.procs > 0 && !f.parallel) {
		return f, mode, fmt.Errorf("--procs %d: want a positive number of ginkgo processes, with --parallel", f.procs)
	}
	mode.Procs = f.procs
	if f.kubeconfig == "" {
		return f, mode, fmt.Errorf("--kubeconfig (or KUBECONFIG) must name the cluster's kubeconfig")
	}
	if f.timeout <= 0 {
		return f, mode, fmt.Errorf("--timeout %s: want a positive duration such as 2h", f.timeout)
	}
	return f, mode, nil
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, mode, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	var repoList []byte
	if f.repoList != "" {
		if repoList, err = os.ReadFile(f.repoList); err != nil {
			return fmt.Errorf("--repo-list: %w", err)
		}
	}
	config, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	r := Runner{
		Config: config, Client: client, Log: stdout, Timeout: f.timeout,
		Spec: RunSpec{Mode: mode, Image: f.image, RepoList: string(repoList)},
		Out:  filepath.Join(f.out, time.Now().UTC().Format("20060102-150405")+"-"+mode.Name),
	}
	outcome, err := r.Run(ctx, f.keep)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\nresults: %s (Sonobuoy layout)\nelapsed: %s\n", outcome.Results.Summary(), outcome.Tarball, outcome.Elapsed.Round(time.Second))
	if outcome.Results.Failed > 0 {
		return fmt.Errorf("%d spec(s) failed; see %s", outcome.Results.Failed, outcome.Tarball)
	}
	return checkSpecCount(mode, outcome.Results)
}

// checkSpecCount fails a run of a mode that names its specs one by one
// when it ran another number of them: a renamed upstream spec would
// otherwise drop out of the run unnoticed.
func checkSpecCount(mode Mode, res Results) error {
	if ran := res.Passed + res.Failed; mode.Specs > 0 && ran != mode.Specs {
		return fmt.Errorf("mode %s ran %d specs, want %d: a spec its focus names no longer matches the suite (conformance/modes.go)", mode.Name, ran, mode.Specs)
	}
	return nil
}
