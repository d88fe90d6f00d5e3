// Package cli holds k1m's own commands: version, server (and server
// remove), agent, cleanup, token (create, list, delete, rotate),
// etcd-snapshot (save, ls, delete, prune), certificate (check, rotate)
// and secrets-encrypt (prepare, rotate, status). The component
// pass-throughs (kubectl and the rest) live in package multicall.
package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	kcli "k8s.io/component-base/cli"
	"k8s.io/component-base/version/verflag"

	"k1m.dev/k1m/pkg/multicall"
	"k1m.dev/k1m/pkg/version"
)

// daemonCommands run for a long time and log like the components do
// (including the Go runtime tuning at start); the others are quiet tools.
var daemonCommands = map[string]bool{"server": true, "agent": true}

// Run runs k1m's root command with args and returns the exit code.
func Run(args []string) int {
	root := newRootCommand()
	root.SetArgs(args)
	if len(args) > 0 && daemonCommands[args[0]] {
		return kcli.Run(root)
	}
	if err := kcli.RunNoErrOutput(root); err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\nRun 'k1m --help' for the commands and components.\n", err)
		return 1
	}
	return 0
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "k1m",
		Short: "k1m: Kubernetes 1.32 patched for very large clusters",
		Long: "k1m runs a Kubernetes 1.32 control plane and nodes from one binary.\n\n" +
			"It also runs every component directly: k1m COMPONENT [flags], where COMPONENT is one of\n  " +
			strings.Join(multicall.Names(), ", ") + ".",
		SilenceUsage: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			verflag.PrintAndExitIfRequested() // --version, as every component has it
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	// The components linked into k1m may already have put --version on the
	// global flag set, which cobra merges in; add it only where it is missing.
	if pflag.CommandLine.Lookup("version") == nil {
		verflag.AddFlags(root.PersistentFlags())
	}
	root.AddCommand(newVersionCommand(), newServerCommand(), newAgentCommand(), newCleanupCommand(), newTokenCommand(), newEtcdSnapshotCommand(), newCertificateCommand(), newSecretsEncryptCommand(), newEtcdPartitionsCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the k1m version, which names the Kubernetes release and the k1m commit",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
		},
	}
}
