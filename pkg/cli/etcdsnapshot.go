package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/version"
)

// snapshotOptions are the flags every etcd-snapshot verb shares: where the
// server keeps its data, its durable etcd's port and the snapshots.
type snapshotOptions struct {
	dataDir, dir string
	etcdPort     int
}

func newEtcdSnapshotCommand() *cobra.Command {
	defaults := config.DefaultServer()
	o := &snapshotOptions{dataDir: defaults.DataDir, etcdPort: defaults.EtcdPort}
	cmd := &cobra.Command{
		Use:   "etcd-snapshot",
		Short: "Save, list, delete and prune snapshots of the server's durable etcd (k3s's verbs); run on a server",
		Long: "A snapshot is a consistent copy of the durable etcd (every object but Events and Leases), with its\n" +
			"SHA-256, revision and the k1m version in NAME.json beside it. Restore one with\n" +
			"k1m server --cluster-reset --cluster-reset-restore-path FILE while the server is stopped.",
		Args: cobra.NoArgs,
	}
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.dataDir, "data-dir", o.dataDir, "the server's data directory (its etcd client certificate is in DATA-DIR/tls)")
	fs.IntVar(&o.etcdPort, "etcd-port", o.etcdPort, "the server's --etcd-port")
	fs.StringVar(&o.dir, "etcd-snapshot-dir", "", "directory of snapshots (default DATA-DIR/snapshots)")
	cmd.AddCommand(o.saveCommand(), o.listCommand(), o.deleteCommand(), o.pruneCommand())
	return cmd
}

func (o *snapshotOptions) store() etcd.Snapshots {
	if o.dir == "" {
		return etcd.Snapshots{Dir: config.DefaultSnapshotDir(o.dataDir)}
	}
	return etcd.Snapshots{Dir: o.dir}
}

func (o *snapshotOptions) saveCommand() *cobra.Command {
	name := etcd.OnDemandPrefix
	var nodeName string
	cmd := &cobra.Command{
		Use:   "save",
		Short: "Take a snapshot now: NAME-NODE-UNIXTIME in the snapshot directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := etcd.CheckSnapshotPrefix(name); err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			node, err := snapshotNodeName(nodeName)
			if err != nil {
				return err
			}
			if err := refuseExternalDurable(o.dataDir, "snapshot it with that etcd's own tools (etcdctl snapshot save), and each partition's etcd (--datastore-partition-endpoint) with it"); err != nil {
				return err
			}
			src, err := server.LocalSnapshotSources(cmd.Context(), o.dataDir, o.etcdPort)
			if err != nil {
				return fmt.Errorf("%w (is the server running with --data-dir %s and --etcd-port %d?)", err, o.dataDir, o.etcdPort)
			}
			now := time.Now()
			info, err := o.store().Save(cmd.Context(), src, server.EtcdClientTLS(o.dataDir),
				etcd.SnapshotName(name, node, now), node, version.String(), now)
			if err != nil {
				return fmt.Errorf("%w (is the server running with --data-dir %s and --etcd-port %d?)", err, o.dataDir, o.etcdPort)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s saved: %s, %d bytes, revision %d, %d keys, sha256 %s\n",
				info.Name, o.store().Dir, info.Size, info.Revision, info.Keys, info.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "first part of the snapshot's name")
	cmd.Flags().StringVar(&nodeName, "node-name", "", "node name in the snapshot's name (default: the hostname)")
	return cmd
}

func snapshotNodeName(name string) (string, error) {
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("--node-name: cannot read the hostname (%v): give --node-name", err)
		}
		name = strings.ToLower(host)
	}
	if err := etcd.CheckSnapshotPrefix(name); err != nil {
		return "", fmt.Errorf("--node-name: %w", err)
	}
	return name, nil
}

func (o *snapshotOptions) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List snapshots, oldest first",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			snapshots, err := o.store().List()
			if err != nil {
				return err
			}
			printSnapshots(cmd.OutOrStdout(), snapshots)
			return nil
		},
	}
}

func printSnapshots(out io.Writer, snapshots []etcd.SnapshotInfo) {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSIZE\tCREATED\tREVISION\tK1M VERSION")
	for _, s := range snapshots {
		revision, ver := "-", s.K1mVersion
		if s.Revision > 0 {
			revision = fmt.Sprint(s.Revision)
		}
		if ver == "" {
			ver = "- (no NAME.json)"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", s.Name, s.Size, s.CreatedAt.Format(time.RFC3339), revision, ver)
	}
	w.Flush()
}

func (o *snapshotOptions) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete snapshots by name (as ls prints them)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			for _, name := range names {
				if err := o.store().Delete(name); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s deleted\n", name)
			}
			return nil
		},
	}
}

func (o *snapshotOptions) pruneCommand() *cobra.Command {
	name := etcd.OnDemandPrefix
	retention := config.DefaultServer().EtcdSnapshots.Retention
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete the oldest snapshots named NAME-... until --etcd-snapshot-retention are left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := etcd.CheckSnapshotPrefix(name); err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			if retention < 1 {
				return fmt.Errorf("--etcd-snapshot-retention %d: want 1 or more snapshots kept", retention)
			}
			deleted, err := o.store().Prune(name, retention)
			for _, d := range deleted {
				fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s deleted\n", d)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "prune snapshots whose names start with NAME- (scheduled ones: "+etcd.ScheduledPrefix+")")
	cmd.Flags().IntVar(&retention, "etcd-snapshot-retention", retention, "snapshots of that name to keep")
	return cmd
}

// refuseExternalDurable refuses a command (a snapshot, a migration) on a
// server whose durable store is an external etcd (--datastore-endpoint):
// that etcd's operator keeps it, and fix says how.
func refuseExternalDurable(dataDir, fix string) error {
	record, err := server.ReadDatastore(dataDir)
	if err != nil {
		return err
	}
	if len(record.Durable) > 0 {
		return fmt.Errorf("the server with --data-dir %s keeps its durable store in the external etcd at %s (--datastore-endpoint): %s", dataDir, strings.Join(record.Durable, ","), fix)
	}
	return nil
}
