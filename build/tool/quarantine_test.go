package tool

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestSkipPatternLeavesOutOnlyQuarantinedTests(t *testing.T) {
	qs := []quarantinedTest{{Package: "k8s.io/a", Test: "TestRacy"}, {Package: "k8s.io/a", Test: "TestOther.Racy"}}
	tests := map[string][]string{"k8s.io/a": {"TestRacy", "TestOther.Racy", "TestRacyButFine"}, "k8s.io/b": {"TestB"}}
	pattern, err := skipPattern(qs, []string{"k8s.io/a", "k8s.io/b"}, func(pkg string) ([]string, error) { return tests[pkg], nil })
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(pattern)
	for name, want := range map[string]bool{"TestRacy": true, "TestOther.Racy": true, "TestRacyButFine": false, "TestOtherXRacy": false, "TestB": false} {
		if got := re.MatchString(name); got != want {
			t.Errorf("-skip %q matches %s = %v, want %v", pattern, name, got, want)
		}
	}
}

func TestSkipPatternRefusesANameSharedWithAnotherPackage(t *testing.T) {
	qs := []quarantinedTest{{Package: "k8s.io/a", Test: "TestRacy"}}
	tests := map[string][]string{"k8s.io/a": {"TestRacy"}, "k8s.io/b": {"TestRacy"}}
	_, err := skipPattern(qs, []string{"k8s.io/a", "k8s.io/b"}, func(pkg string) ([]string, error) { return tests[pkg], nil })
	if err == nil || !strings.Contains(err.Error(), "k8s.io/b") {
		t.Fatalf("err = %v, want one naming k8s.io/b, whose TestRacy -skip would leave out too", err)
	}
}

func TestSkipPatternEmptyWithoutQuarantine(t *testing.T) {
	pattern, err := skipPattern(nil, []string{"k8s.io/a"}, func(string) ([]string, error) { return []string{"TestRacy"}, nil })
	if err != nil || pattern != "" {
		t.Fatalf("pattern, err = %q, %v; want no -skip", pattern, err)
	}
}

func TestQuarantinedInOnlyTestedPackages(t *testing.T) {
	for _, q := range quarantine {
		if q.Reason == "" {
			t.Errorf("%s %s is quarantined without a reason", q.Package, q.Test)
		}
		if got := quarantinedIn([]string{q.Package}); len(got) == 0 {
			t.Errorf("quarantinedIn(%s) misses %s", q.Package, q.Test)
		}
	}
	if got := quarantinedIn([]string{"k8s.io/not/quarantined"}); len(got) != 0 {
		t.Errorf("quarantinedIn of an unlisted package = %v, want none", got)
	}
}

func TestTestFuncsIn(t *testing.T) {
	dir := t.TempDir()
	src := "package a\n\nfunc TestOne(t *testing.T) {}\nfunc helper() {}\nfunc TestTwo(t *testing.T) {}\n// func TestCommented(t *testing.T) {}\n"
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\nfunc TestNotATest(t int) {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := testFuncsIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "TestOne,TestTwo" {
		t.Errorf("testFuncsIn = %v, want [TestOne TestTwo]", got)
	}
}

func TestSplitQuarantinedRunsSharedNamesApart(t *testing.T) {
	pkgs := []string{"k8s.io/apiserver/pkg/endpoints", "k8s.io/apiserver/pkg/storage/cacher", "k8s.io/apiserver/pkg/server"}
	qs := []quarantinedTest{{Package: "k8s.io/apiserver/pkg/storage/cacher", Test: "TestList"}}
	with, rest := splitQuarantined(pkgs, qs)
	if !reflect.DeepEqual(with, []string{"k8s.io/apiserver/pkg/storage/cacher"}) {
		t.Errorf("with quarantine = %v, want only the cacher", with)
	}
	if !reflect.DeepEqual(rest, []string{"k8s.io/apiserver/pkg/endpoints", "k8s.io/apiserver/pkg/server"}) {
		t.Errorf("rest = %v, want endpoints and server in order", rest)
	}
	// endpoints has a TestList of its own: apart from the cacher, no -skip
	// reaches it.
	testsOf := func(pkg string) ([]string, error) { return []string{"TestList"}, nil }
	if _, err := skipPattern(qs, with, testsOf); err != nil {
		t.Errorf("skipPattern over the quarantined packages alone: %v", err)
	}
}
