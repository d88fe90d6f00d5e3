// Package multicall lets the single k1m binary run any Kubernetes component,
// either as `k1m <component> [flags]` or through a link named after the
// component (like k3s), so one binary serves every role on a node.
package multicall

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"k8s.io/component-base/cli"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream mains do
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream mains do
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream mains do
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's auth plugins
	_ "time/tzdata"                             // CronJob time zones, as upstream mains do

	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/flavor"
)

// Component builds the cobra command of one upstream component.
type Component func() *cobra.Command

var components = map[string]Component{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-proxy":              proxy.NewProxyCommand,
	"kubelet":                 kubelet.NewKubeletCommand,
	"kubectl":                 kubectlcmd.NewDefaultKubectlCommand,
}

// Names lists the components the binary can run, sorted.
func Names() []string {
	names := make([]string, 0, len(components))
	for name := range components {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Lookup finds the component named by argv: by the program name (a link
// named kubelet) or by the first argument (k1m kubelet). It returns the
// component's name and the arguments meant for it.
func Lookup(argv []string) (name string, args []string, ok bool) {
	if len(argv) == 0 {
		return "", nil, false
	}
	if base := filepath.Base(argv[0]); components[base] != nil {
		return base, argv[1:], true
	}
	if len(argv) > 1 && components[argv[1]] != nil {
		return argv[1], argv[2:], true
	}
	return "", nil, false
}

// Run runs the named component with args the way its upstream main does and
// returns the process exit code.
func Run(name string, args []string) int {
	cmd := components[name]()
	cmd.SetArgs(args)
	if name == "kubectl" {
		useServerKubeconfig(args)
		// kubectl prints its own errors, as in cmd/kubectl/kubectl.go.
		if err := cli.RunNoErrOutput(cmd); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	}
	return cli.Run(cmd)
}

// Start runs the named component with args and reports its end on the
// returned channel. The k1m build runs it in this process, in a goroutine
// (patch 0005 lets components share the signal context); the stock build,
// whose components each set up their own, runs it as a child process of
// this binary (child.go; pkg/flavor says which), so that `make cluster
// FLAVOR=stock` starts the unpatched components the same way. A
// component that must outlive its own end (the leader-elected ones, which
// exit when they lose their election) is run with Supervise instead.
func Start(ctx context.Context, name string, args []string) <-chan error {
	done := make(chan error, 1)
	if _, ok := components[name]; !ok {
		done <- fmt.Errorf("unknown component %q", name)
		return done
	}
	if flavor.ComponentsInOneProcess {
		return inProcess(ctx, name, args, done)
	}
	return childProcess(ctx, name, args, done)
}

// inProcess runs the component in a goroutine of this process.
func inProcess(ctx context.Context, name string, args []string, done chan error) <-chan error {
	// Each component applies the (same) logging configuration; in one
	// process only the first may take effect, the others must not fail.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	cmd := components[name]()
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	go func() {
		err := cmd.ExecuteContext(ctx)
		if err == nil {
			err = fmt.Errorf("%s stopped", name)
		}
		done <- fmt.Errorf("%s: %w", name, err)
	}()
	return done
}

// DefaultAdminKubeconfig is where `k1m server` with its default data
// directory writes the administrator's kubeconfig.
var DefaultAdminKubeconfig = datadir.DefaultAdminKubeconfig

// useServerKubeconfig makes `k1m kubectl` talk to the local k1m server
// when nothing else names a kubeconfig (as k3s kubectl does).
func useServerKubeconfig(args []string) {
	if os.Getenv("KUBECONFIG") != "" {
		return
	}
	for _, a := range args {
		if a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") {
			return
		}
	}
	if _, err := os.Stat(DefaultAdminKubeconfig); err == nil {
		os.Setenv("KUBECONFIG", DefaultAdminKubeconfig)
	}
}

// ExecSelf replaces this process (same PID) with a fresh start of the same
// binary and arguments, with env: for parts that read their settings only
// at process start (the kubelet's renew interval, the Go runtime's memory
// limit). The binary is named by its path, so that the process keeps its
// name (ps, ss); /proc/self/exe is the fallback when that path is gone.
func ExecSelf(env []string) error {
	if exe, err := os.Executable(); err == nil {
		if err := syscall.Exec(exe, os.Args, env); err == nil {
			return nil
		}
	}
	return syscall.Exec("/proc/self/exe", os.Args, env)
}
