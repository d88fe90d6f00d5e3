package tool

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k1m.dev/k1m/build/stamp"
)

// Binaries are the programs a build produces: the k1m binary and the
// standalone components (the kind node image and benchmarks need them).
var Binaries = []string{
	"./cmd/k1m",
	"k8s.io/kubernetes/cmd/kube-apiserver",
	"k8s.io/kubernetes/cmd/kube-controller-manager",
	"k8s.io/kubernetes/cmd/kube-scheduler",
	"k8s.io/kubernetes/cmd/kube-proxy",
	"k8s.io/kubernetes/cmd/kubelet",
	"k8s.io/kubernetes/cmd/kubectl",
	"k8s.io/kubernetes/cmd/kubeadm",
}

// build compiles Binaries of one flavour into binDir, printing a progress
// line every few seconds (a cold build takes many minutes).
func (p project) build(flavor stamp.Flavor, binDir string) error {
	env, err := p.flavorEnv(flavor)
	if err != nil {
		return err
	}
	ldflags, err := p.ldflagsFor(flavor)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	args := append([]string{"build", "-v", "-ldflags", ldflags, "-o", strings.TrimSuffix(binDir, "/") + "/"}, Binaries...)
	cmd := exec.Command("go", args...)
	cmd.Dir = p.root
	cmd.Env = env
	fmt.Fprintf(p.log, "k1m-build: building the %s flavour into %s (%d binaries)\n", flavor, binDir, len(Binaries))
	return runWithProgress(cmd, p.log, string(flavor))
}

// flavorEnv is the environment every go command of a flavour runs with:
// the workspace (patched modules for k1m, none for stock) and the same
// build flags for build, vet and test, so they share one build cache.
// The k1m flavour prepares the patched tree first.
func (p project) flavorEnv(flavor stamp.Flavor) ([]string, error) {
	gowork := "off"
	switch flavor {
	case stamp.K1m:
		if err := p.prepare(); err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(filepath.Join(p.out, "go.work"))
		if err != nil {
			return nil, err
		}
		gowork = abs
	case stamp.Stock:
	default:
		return nil, fmt.Errorf("--flavor %q: want k1m or stock", flavor)
	}
	goflags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -trimpath " + buildTags(flavor))
	return append(os.Environ(), "GOWORK="+gowork, "CGO_ENABLED=0", "GOFLAGS="+goflags), nil
}

// goCommand runs `go args...` in the flavour's environment; after a failed
// `go test` it prints the tests' messages again (failureRecap).
func (p project) goCommand(flavor stamp.Flavor, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("go needs a go subcommand, e.g. k1m-build go --flavor k1m test ./pkg/...")
	}
	cmd, err := p.goCmd(flavor, args)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = stdout, p.log
	if args[0] != "test" {
		return cmd.Run()
	}
	recap := &failureRecap{out: stdout}
	cmd.Stdout = recap
	err = cmd.Run()
	if err != nil {
		recap.print(stdout)
	}
	return err
}

// stockTag is pkg/flavor's Tag (a test holds them equal): k1m-build is
// compiled against the unpatched modules, where pkg/flavor's k1m file
// does not compile, so it cannot import it.
const stockTag = "k1m_stock"

// buildTags tells k1m's own code (pkg/flavor) which flavour it is compiled
// into, so the stock k1m binary never passes a flag only the patched
// components know: the stock flavour's tag, none for k1m.
func buildTags(flavor stamp.Flavor) string {
	if flavor == stamp.Stock {
		return "-tags=" + stockTag
	}
	return ""
}

// runWithProgress runs cmd, whose stderr lists each package as `go build -v`
// compiles it, and reports the count every 15 s; other lines (errors) pass
// through.
func runWithProgress(cmd *exec.Cmd, log io.Writer, label string) error {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = log
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	compiled, last := 0, time.Now()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if isPackageLine(line) {
			compiled++
			if time.Since(last) > 15*time.Second {
				fmt.Fprintf(log, "  [%s] %d packages compiled, %s elapsed\n", label, compiled, time.Since(start).Round(time.Second))
				last = time.Now()
			}
			continue
		}
		fmt.Fprintln(log, line)
	}
	err = cmd.Wait()
	fmt.Fprintf(log, "  [%s] %d packages compiled in %s\n", label, compiled, time.Since(start).Round(time.Second))
	return err
}

// isPackageLine tells `go build -v` package names from compiler messages,
// which contain spaces or colons.
func isPackageLine(line string) bool {
	return line != "" && !strings.ContainsAny(line, " :\t") && !strings.HasPrefix(line, "#")
}
