package tool

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"

	"k1m.dev/k1m/build/stamp"
)

// testEvent is one line of `go test -json` (cmd/test2json).
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// testResult is what one `go test -json` run found.
type testResult struct {
	failedTests    map[string][]string // package -> failed top-level tests
	failedPackages []string            // packages that failed outside any test (build error, panic in init)
}

// collectTestResults reads `go test -json` output, echoes the package
// summaries and the output of failed tests, and records the failures.
func collectTestResults(r io.Reader, out io.Writer) (testResult, error) {
	res := testResult{failedTests: map[string][]string{}}
	testOutput := map[string]*strings.Builder{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		var ev testEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			fmt.Fprintln(out, sc.Text()) // not JSON: a build error, pass it on
			continue
		}
		key := ev.Package + " " + ev.Test
		switch {
		case ev.Test == "" && ev.Action == "output":
			if strings.HasPrefix(ev.Output, "ok") || strings.HasPrefix(ev.Output, "FAIL") || strings.HasPrefix(ev.Output, "?") {
				fmt.Fprint(out, ev.Output)
			}
		case ev.Test == "" && ev.Action == "fail":
			if len(res.failedTests[ev.Package]) == 0 {
				res.failedPackages = append(res.failedPackages, ev.Package)
			}
		case ev.Action == "output":
			if testOutput[key] == nil {
				testOutput[key] = &strings.Builder{}
			}
			testOutput[key].WriteString(ev.Output)
		case ev.Action == "fail" && !strings.Contains(ev.Test, "/"):
			res.failedTests[ev.Package] = append(res.failedTests[ev.Package], ev.Test)
			if b := testOutput[key]; b != nil {
				fmt.Fprint(out, b.String())
			}
		}
	}
	return res, sc.Err()
}

// runTestsRetryingFlakes runs `go test` on pkgs, leaving out the tests
// skip matches (empty: none). A test that fails is run again on its own, up
// to retries times; one that passes then is reported as FLAKY and does not
// fail the run (upstream has timing-sensitive tests, see docs/build.md); one
// that fails every time, or a package that fails outside its tests, does.
//
// Go's test cache answers for a package whose test binary and inputs did
// not change (same series, same pins): a warm clean clone does not spend
// five minutes running again what passed on the same bytes.
func (p project) runTestsRetryingFlakes(pkgs []string, skip string, stdout io.Writer) error {
	args := []string{"test", "-json"}
	if skip != "" {
		args = append(args, "-skip", skip)
	}
	cmd, err := p.goCmd(stamp.K1m, append(args, pkgs...))
	if err != nil {
		return err
	}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	res, scanErr := collectTestResults(pipe, stdout)
	runErr := cmd.Wait()
	if scanErr != nil {
		return scanErr
	}
	if len(res.failedPackages) > 0 {
		return fmt.Errorf("packages failed outside their tests (build error or panic): %s", strings.Join(res.failedPackages, " "))
	}
	if runErr != nil && len(res.failedTests) == 0 {
		return runErr
	}
	return p.retryFailed(res.failedTests, stdout)
}

// retries is how many more times a failed upstream test runs: its
// timing-sensitive tests fail on stock and k1m alike at rates of a few per
// cent to a third on a 2-core VM (docs/build.md), and three failures in a
// row are what a broken test looks like.
const retries = 2

func (p project) retryFailed(failed map[string][]string, stdout io.Writer) error {
	pkgs := make([]string, 0, len(failed))
	for pkg := range failed {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	var stillFailing []string
	for _, pkg := range pkgs {
		tests := failed[pkg]
		passed, err := p.retryPackage(pkg, tests, stdout)
		if err != nil {
			return err
		}
		if !passed {
			stillFailing = append(stillFailing, pkg+" "+strings.Join(tests, " "))
			continue
		}
		for _, t := range tests {
			fmt.Fprintf(stdout, "k1m-build: FLAKY (failed, then passed on a retry): %s %s\n", pkg, t)
		}
	}
	if len(stillFailing) > 0 {
		return fmt.Errorf("tests failed %d times in a row:\n  %s", retries+1, strings.Join(stillFailing, "\n  "))
	}
	return nil
}

// retryPackage runs tests of pkg on their own until they pass, at most
// retries times.
func (p project) retryPackage(pkg string, tests []string, stdout io.Writer) (bool, error) {
	for attempt := 1; attempt <= retries; attempt++ {
		fmt.Fprintf(stdout, "k1m-build: retry %d of %d, %s: %s\n", attempt, retries, pkg, strings.Join(tests, " "))
		cmd, err := p.goCmd(stamp.K1m, []string{"test", "-count=1", "-run", "^(" + strings.Join(tests, "|") + ")$", pkg})
		if err != nil {
			return false, err
		}
		cmd.Stdout, cmd.Stderr = stdout, stdout
		if cmd.Run() == nil {
			return true, nil
		}
	}
	return false, nil
}

// goCmd is a go command in a flavour's environment, not yet started.
func (p project) goCmd(flavor stamp.Flavor, args []string) (*exec.Cmd, error) {
	env, err := p.flavorEnv(flavor)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = p.root
	cmd.Env = env
	return cmd, nil
}
