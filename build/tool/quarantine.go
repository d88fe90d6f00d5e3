package tool

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// quarantinedTest is an upstream test `make verify` does not run: one that
// fails on the stock tree as often as on the patched tree on this kind of
// machine, so its result says nothing about the series. Each entry says why
// and how it was measured; docs/build.md keeps the figures.
type quarantinedTest struct {
	Package, Test, Reason string
}

var quarantine = []quarantinedTest{{
	Package: "k8s.io/apiserver/pkg/storage/cacher",
	Test:    "TestDelayedWatchDelivery",
	Reason: "races watcher.Stop against the etcd watch: its 21 updates finish in about 4 ms, " +
		"before the first event reaches the watcher; failed 19 of 20 runs on the stock tree and 19 of 20 on the k1m tree",
}, {
	Package: "k8s.io/apiserver/pkg/storage/cacher",
	Test:    "TestList",
	Reason: "runs the list cases with ConsistentListFromCache off (1.32 and k1m default it on); its non-consistent List " +
		"expects the cache to have caught up with writes it does not wait for; failed 10 of 20 runs on the stock tree " +
		"and 6 of 20 on the k1m tree; the same cases with the gate on, TestListWithConsistentListFromCache, still run",
}}

// quarantinedIn is the quarantine entries whose package is in pkgs.
func quarantinedIn(pkgs []string) []quarantinedTest {
	tested := map[string]bool{}
	for _, pkg := range pkgs {
		tested[pkg] = true
	}
	var qs []quarantinedTest
	for _, q := range quarantine {
		if tested[q.Package] {
			qs = append(qs, q)
		}
	}
	return qs
}

// splitQuarantined separates pkgs into those holding a test of qs and the
// rest, each in the order of pkgs.
func splitQuarantined(pkgs []string, qs []quarantinedTest) (with, rest []string) {
	holds := map[string]bool{}
	for _, q := range qs {
		holds[q.Package] = true
	}
	for _, pkg := range pkgs {
		if holds[pkg] {
			with = append(with, pkg)
		} else {
			rest = append(rest, pkg)
		}
	}
	return with, rest
}

// skipPattern is the `go test -skip` value that leaves out qs. One -skip
// applies to every package of a go test run, so it is an error when a
// quarantined name is also a test of another package in pkgs: that test
// would silently not run.
func skipPattern(qs []quarantinedTest, pkgs []string, testsOf func(pkg string) ([]string, error)) (string, error) {
	if len(qs) == 0 {
		return "", nil
	}
	owner := map[string]string{}
	names := make([]string, 0, len(qs))
	for _, q := range qs {
		owner[q.Test] = q.Package
		names = append(names, regexp.QuoteMeta(q.Test))
	}
	for _, pkg := range pkgs {
		tests, err := testsOf(pkg)
		if err != nil {
			return "", err
		}
		for _, t := range tests {
			if o, ok := owner[t]; ok && o != pkg {
				return "", fmt.Errorf("quarantined test %s of %s is also a test of %s, which -skip would leave out too; "+
					"quarantine it there as well or run the packages separately (build/tool/quarantine.go)", t, o, pkg)
			}
		}
	}
	sort.Strings(names)
	return "^(" + strings.Join(names, "|") + ")$", nil
}

var testFuncRE = regexp.MustCompile(`(?m)^func (Test\w*)\(`)

// testFuncsIn lists the top-level test functions of the package in dir.
func testFuncsIn(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var tests []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFuncRE.FindAllSubmatch(src, -1) {
			tests = append(tests, string(m[1]))
		}
	}
	return tests, nil
}
