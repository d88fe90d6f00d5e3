// Package codegen re-runs Kubernetes' code generators on a patched tree and
// reports generated files that differ from what the patches carry, so no
// generated code in the series is edited by hand or left stale.
//
// A patch names its generator runs in its Codegen header field, one run a
// line: the generator, then the packages, e.g.
//
//	Codegen: deepcopy-gen k8s.io/kubelet/config/v1beta1
//	 conversion-gen k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1
package codegen

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Run is one generator invocation.
type Run struct {
	Generator string
	Packages  []string
}

// generators holds the flags each generator gets, as upstream's
// hack/update-codegen.sh passes them.
var generators = map[string]struct {
	output string
	flags  []string
}{
	"deepcopy-gen": {"zz_generated.deepcopy.go", []string{"--bounding-dirs", "k8s.io/kubernetes,k8s.io/api"}},
	"conversion-gen": {"zz_generated.conversion.go", []string{
		"--extra-peer-dirs", "k8s.io/kubernetes/pkg/apis/core",
		"--extra-peer-dirs", "k8s.io/kubernetes/pkg/apis/core/v1",
		"--extra-peer-dirs", "k8s.io/api/core/v1"}},
	"defaulter-gen": {"zz_generated.defaults.go", nil},
}

// ParseField reads a Codegen header field.
func ParseField(field string) ([]Run, error) {
	var runs []Run
	for _, line := range strings.Split(field, "\n") {
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		if _, ok := generators[words[0]]; !ok {
			return nil, fmt.Errorf("Codegen: unknown generator %q (known: deepcopy-gen, conversion-gen, defaulter-gen)", words[0])
		}
		if len(words) < 2 {
			return nil, fmt.Errorf("Codegen: %s names no package", words[0])
		}
		runs = append(runs, Run{Generator: words[0], Packages: words[1:]})
	}
	return runs, nil
}

// Check runs each generator in the workspace goWork (whose modules are the
// patched tree) from mainDir, with the Kubernetes boilerplate header, and
// returns the generated files it changed.
func Check(mainDir, goWork, header string, runs []Run, dirOf func(pkg string) (string, error)) ([]string, error) {
	var changed []string
	for _, r := range runs {
		gen := generators[r.Generator]
		before := map[string][32]byte{}
		for _, pkg := range r.Packages {
			dir, err := dirOf(pkg)
			if err != nil {
				return nil, err
			}
			before[filepath.Join(dir, gen.output)] = hashFile(filepath.Join(dir, gen.output))
		}
		args := append([]string{"tool", r.Generator, "--go-header-file", header, "--output-file", gen.output}, gen.flags...)
		cmd := exec.Command("go", append(args, r.Packages...)...)
		cmd.Dir = mainDir
		cmd.Env = append(os.Environ(), "GOWORK="+goWork)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s %s: %w\n%s", r.Generator, strings.Join(r.Packages, " "), err, stderr.String())
		}
		for file, sum := range before {
			if hashFile(file) != sum {
				changed = append(changed, file)
			}
		}
	}
	return changed, nil
}

func hashFile(path string) [32]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return [32]byte{}
	}
	return sha256.Sum256(data)
}
