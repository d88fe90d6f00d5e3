package debian

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestParseLists(t *testing.T) {
	lists, order, err := ParseLists("# c\n\nA=\"aa b2\"\nB=\"x-y $A y.z\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"A", "B"}) || !slices.Equal(lists["B"], []string{"x-y", "aa", "b2", "y.z"}) {
		t.Errorf("lists %v order %v", lists, order)
	}
	for _, bad := range []string{
		`A="$B"`,                    // not defined above
		"A=\"aa\"\nA=\"bb\"",        // twice
		"A=\"aa\"\nB=\"aa $A\"",     // a package twice in one list
		`A='aa bb'`,                 // not the form
		`A="aa" # c`,                // nor this
		`export A="aa"`,             // nor this
		"A=\"aa `id`\"",             // not a package name
		`A="aa $(id)"`,              // nor this
		`A="aa ${B}"`,               // nor this
		`A="Upper"`,                 // nor this
		`A="a"`,                     // nor this (two characters at least)
		"A=\"aa\"\nB=\"$Ab\"",       // $Ab is no list
		"A=\"aa\"\nB=\"$A_MORE\"",   // nor $A_MORE
		"A=\"aa\"\nB=\"${A}\"",      // only $NAME
		"A=\"aa\"\nB=\"bb\\\\ cc\"", // no escapes
	} {
		if _, _, err := ParseLists(bad); err == nil {
			t.Errorf("ParseLists accepted %q", bad)
		}
	}
}

// TestShellReadsTheListsAsGoDoes sources packages.env in bash, as the
// scripts do, and compares every list with Packages.
func TestShellReadsTheListsAsGoDoes(t *testing.T) {
	names := ListNames()
	script := `set -euo pipefail; . ./packages.env; for n in "$@"; do printf '%s=%s\n' "$n" "${!n}"; done`
	out, err := exec.Command("bash", append([]string{"-c", script, "bash"}, names...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("bash sourcing packages.env: %v\n%s", err, out)
	}
	var want strings.Builder
	for _, n := range names {
		want.WriteString(n + "=" + strings.Join(Packages(n), " ") + "\n")
	}
	if string(out) != want.String() {
		t.Errorf("bash reads packages.env as\n%s\nGo as\n%s", out, want.String())
	}
}

// TestListsAgree holds the lists to what their consumers need of each
// other.
func TestListsAgree(t *testing.T) {
	runtime, cluster, base := Packages("RUNTIME_PACKAGES"), Packages("CLUSTER_PACKAGES"), Packages("KIND_BASE_PACKAGES")
	for _, p := range runtime {
		if !slices.Contains(cluster, p) {
			t.Errorf("%s is a runtime package but not in CLUSTER_PACKAGES: make cluster would run k1m without it", p)
		}
		if !slices.Contains(base, p) && p != "ipset" {
			t.Errorf("%s is a runtime package but not in KIND_BASE_PACKAGES: kind's nodes would lack what k1m's have", p)
		}
	}
	for _, p := range Packages("KIND_PROXY_PACKAGES") {
		if !slices.Contains(base, p) {
			t.Errorf("kube-proxy's image takes %s from the kind base tree, which does not install it", p)
		}
	}
	for _, p := range Packages("CRI_PACKAGES") {
		if !slices.Contains(runtime, p) {
			t.Errorf("%s is in CRI_PACKAGES but not in RUNTIME_PACKAGES", p)
		}
	}
}
