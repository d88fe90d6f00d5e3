// Package cli holds k1m's own commands (version, and the server and agent
// roles); the component pass-throughs live in package multicall.
package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	kcli "k8s.io/component-base/cli"

	"k1m.dev/k1m/pkg/multicall"
	"k1m.dev/k1m/pkg/version"
)

// Run runs k1m's root command with args and returns the exit code.
func Run(args []string) int {
	root := newRootCommand()
	root.SetArgs(args)
	return kcli.Run(root)
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "k1m",
		Short: "k1m: Kubernetes 1.32 patched for very large clusters",
		Long: "k1m runs a Kubernetes 1.32 control plane and nodes from one binary.\n\n" +
			"It also runs every component directly: k1m COMPONENT [flags], where COMPONENT is one of\n  " +
			strings.Join(multicall.Names(), ", ") + ".",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q: run 'k1m --help' for the commands and components", args[0])
			}
			return cmd.Help()
		},
	}
	root.AddCommand(newVersionCommand())
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
