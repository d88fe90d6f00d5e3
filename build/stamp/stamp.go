// Package stamp computes the version every binary reports, as -ldflags -X
// values for k8s.io/component-base/version and k8s.io/client-go/pkg/version
// (the variables upstream's hack/lib/version.sh sets).
package stamp

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Flavor is what a binary was built from.
type Flavor string

const (
	K1m   Flavor = "k1m"   // patched by the series
	Stock Flavor = "stock" // unpatched upstream modules, for side-by-side benchmarks
)

// Info is the identity stamped into a binary.
type Info struct {
	GitVersion   string // v1.32.5+k1m.0123456789ab (k1m) or v1.32.5 (stock)
	GitCommit    string // the k1m commit, full
	GitTreeState string // clean or dirty
	BuildDate    string // the commit's date, so builds are reproducible
	Major, Minor string
}

var releaseRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

// Commit describes a k1m checkout.
type Commit struct {
	Hash  string
	Date  time.Time
	Dirty bool
}

// ReadCommit asks git about the checkout in dir. Outside a git checkout it
// returns a zero Commit (hash "unknown").
func ReadCommit(dir string) Commit {
	out, err := exec.Command("git", "-C", dir, "show", "-s", "--format=%H %ct", "HEAD").Output()
	if err != nil {
		return Commit{}
	}
	var c Commit
	var secs int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "%s %d", &c.Hash, &secs); err != nil {
		return Commit{}
	}
	c.Date = time.Unix(secs, 0).UTC()
	status, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	c.Dirty = err != nil || len(strings.TrimSpace(string(status))) > 0
	return c
}

// Compute returns the identity of a build of the given Kubernetes release.
func Compute(flavor Flavor, kubeVersion string, c Commit) (Info, error) {
	m := releaseRE.FindStringSubmatch(kubeVersion)
	if m == nil {
		return Info{}, fmt.Errorf("KUBERNETES_VERSION %q is not a release of the form vMAJOR.MINOR.PATCH", kubeVersion)
	}
	info := Info{Major: m[1], Minor: m[2], GitTreeState: "clean", BuildDate: "1970-01-01T00:00:00Z"}
	if !c.Date.IsZero() {
		info.BuildDate = c.Date.Format(time.RFC3339)
	}
	switch flavor {
	case Stock:
		info.GitVersion = kubeVersion
	case K1m:
		short := "unknown"
		if len(c.Hash) >= 12 {
			short = c.Hash[:12]
		}
		// Build metadata (after +) keeps semver ordering equal to the
		// upstream release, so version-skew checks treat k1m as v1.32.5.
		info.GitVersion = kubeVersion + "+k1m." + short
		info.GitCommit = c.Hash
		if c.Dirty {
			info.GitVersion += ".dirty"
			info.GitTreeState = "dirty"
		}
	default:
		return Info{}, fmt.Errorf("flavor %q is not one of k1m, stock", flavor)
	}
	return info, nil
}

// LDFlags returns the linker flags that strip the binary and stamp info.
func (i Info) LDFlags() string {
	flags := []string{"-s", "-w"}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, kv := range [][2]string{
			{"gitVersion", i.GitVersion}, {"gitMajor", i.Major}, {"gitMinor", i.Minor},
			{"gitCommit", i.GitCommit}, {"gitTreeState", i.GitTreeState}, {"buildDate", i.BuildDate},
		} {
			flags = append(flags, fmt.Sprintf("-X %s.%s=%s", pkg, kv[0], kv[1]))
		}
	}
	return strings.Join(flags, " ")
}
