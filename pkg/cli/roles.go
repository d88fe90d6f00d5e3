package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	genericapiserver "k8s.io/apiserver/pkg/server"

	"k1m.dev/k1m/pkg/agent"
	"k1m.dev/k1m/pkg/cleanup"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/multicall"
	"k1m.dev/k1m/pkg/server"
)

func newServerCommand() *cobra.Command {
	cfg := config.DefaultServer()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a k1m control plane (two etcds, kube-apiserver, controller-manager, scheduler) and, unless --disable-agent, a node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			warnTokenOnCommandLine(cmd, "server", cfg.Token)
			if err := applyConfigFile(cmd.Flags(), cfg.ConfigFile); err != nil {
				return err
			}
			// Patch 0005: every component in this process shares this context.
			return server.Run(genericapiserver.SetupSignalContext(), cfg, cmd.OutOrStdout())
		},
	}
	cfg.AddFlags(cmd.Flags())
	cmd.AddCommand(newServerRemoveCommand())
	return cmd
}

// newServerRemoveCommand is `k1m server remove NAME`, run on another
// server of the cluster.
func newServerRemoveCommand() *cobra.Command {
	defaults := config.DefaultServer()
	o := server.RemoveOptions{DataDir: defaults.DataDir, EtcdPort: defaults.EtcdPort, NoFsyncEtcdPort: defaults.NoFsyncEtcdPort}
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Take the server NAME out of its multi-server cluster (its etcd members, records and Node); run on another server",
		Long: "Removes NAME's member of the durable etcd (refused, with nothing changed, when the members left could not\n" +
			"keep a quorum), its member of the no-fsync etcd, its records and its Node. Stop NAME first; to bring it\n" +
			"back, start it with an empty --data-dir and --server, --token.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return server.RemoveServer(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "the data directory of the server this runs on (its etcd client certificate and admin kubeconfig)")
	fs.IntVar(&o.EtcdPort, "etcd-port", o.EtcdPort, "that server's --etcd-port")
	fs.IntVar(&o.NoFsyncEtcdPort, "no-fsync-etcd-port", o.NoFsyncEtcdPort, "that server's --no-fsync-etcd-port")
	config.AddRenamedFlags(fs)
	return cmd
}

func newAgentCommand() *cobra.Command {
	cfg := config.DefaultAgent()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Join this machine to a k1m cluster as a node (containerd, kubelet, kube-proxy)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			warnTokenOnCommandLine(cmd, "agent", cfg.Token)
			if err := applyConfigFile(cmd.Flags(), cfg.ConfigFile); err != nil {
				return err
			}
			completed, err := cfg.Complete()
			if err != nil {
				return err
			}
			ctx := genericapiserver.SetupSignalContext()
			err = agent.Run(ctx, completed, cmd.OutOrStdout())
			if errors.Is(err, agent.ErrRestart) && ctx.Err() == nil { // not when asked to stop meanwhile
				// A fresh process: the kubelet cannot start twice in one.
				// Without $K1M_TOKEN (Complete took it): the node runs
				// on its own certificate by now.
				return multicall.ExecSelf(os.Environ())
			}
			return err
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}

// warnTokenOnCommandLine warns of a server token given as --token on the
// command line. It runs before the config file is applied: token is then
// the command line's --token (the defaults hold none), the one that shows
// in /proc/PID/cmdline.
func warnTokenOnCommandLine(cmd *cobra.Command, role, token string) {
	if w := config.CommandLineTokenWarning(role, token); w != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), w)
	}
}

func applyConfigFile(fs *pflag.FlagSet, path string) error {
	return config.ApplyFile(fs, path, fs.Changed("config"))
}

func newCleanupCommand() *cobra.Command {
	dirs := []string{"/var/lib/k1m"}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Stop every pod, containerd and mount k1m started on this machine and remove kube-proxy's rules (data is kept)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// kube-proxy first removes its own iptables and nftables rules.
			if code := multicall.Run("kube-proxy", []string{"--cleanup"}); code != 0 {
				return fmt.Errorf("kube-proxy --cleanup exited with %d", code)
			}
			return cleanup.Run(dirs, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringSliceVar(&dirs, "data-dir", dirs, "data directories whose mounts to release (repeatable)")
	return cmd
}
