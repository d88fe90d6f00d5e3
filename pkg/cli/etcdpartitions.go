package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/grpclog"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/server"
)

func newEtcdPartitionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd-partitions",
		Short: "Move resources of a running cluster into partitions of the store; run on a server",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newMigrateCommand())
	return cmd
}

func newMigrateCommand() *cobra.Command {
	defaults := config.DefaultServer()
	m := &server.Migrate{DataDir: defaults.DataDir, EtcdPort: defaults.EtcdPort}
	var names []string
	cmd := &cobra.Command{
		Use:   "migrate --etcd-partitions=pods,nodes",
		Short: "Move resources from the durable etcd into partitions of their own, servers restarted one at a time",
		Long: "Refuses writes to the moved resources through every server (a ValidatingAdmissionPolicy), records the\n" +
			"migration, then waits while you restart each server, one at a time, with the new --etcd-partitions: the\n" +
			"first seeds each partition from its durable etcd, the others join it. When every server runs the new\n" +
			"layout, it records it, deletes the moved keys from the durable etcd and lifts the refusal. Running it\n" +
			"again resumes an interrupted migration. Partitions a running cluster can add: " + strings.Join(constants.MovableStorePartitionNames(), ", ") + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			partitions, err := migrationPartitions(names)
			if err != nil {
				return err
			}
			if !flavor.SeparateNoFsyncStore {
				return fmt.Errorf("k1m etcd-partitions: the stock build keeps every resource in one etcd")
			}
			if err := refuseExternalDurable(m.DataDir, "k1m moves resources only out of an embedded durable etcd; beside an external one the partitions are chosen when the cluster is made (--etcd-partitions, --datastore-partition-endpoint)"); err != nil {
				return err
			}
			// The servers restart while it waits: the etcd client's
			// reconnect warnings would bury its progress lines.
			grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
			m.Partitions, m.Out = partitions, cmd.OutOrStdout()
			return m.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&names, "etcd-partitions", nil, "every partition the cluster is to have, as servers will be given it: some of "+strings.Join(constants.StorePartitionNames(), ", "))
	fs.StringVar(&m.DataDir, "data-dir", m.DataDir, "the server's data directory (its etcd client certificate and admin kubeconfig)")
	fs.IntVar(&m.EtcdPort, "etcd-port", m.EtcdPort, "the server's --etcd-port")
	fs.DurationVar(&m.Timeout, "timeout", time.Hour, "how long to wait for the servers' restarts")
	fs.DurationVar(&m.Settle, "settle", 65*time.Second, "how long writes admitted before every server refused them may take to reach etcd: the servers' kube-apiserver --request-timeout (1m) and a margin")
	return cmd
}

// migrationPartitions are the partitions --etcd-partitions names, in
// constants.StorePartitions' order.
func migrationPartitions(names []string) ([]constants.StorePartition, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("--etcd-partitions: none given: name every partition the cluster is to have, e.g. --etcd-partitions=pods,nodes")
	}
	for _, name := range names {
		if _, ok := constants.StorePartitionNamed(name); !ok {
			return nil, fmt.Errorf("--etcd-partitions: %q is not a resource k1m partitions: want some of %s, comma separated, e.g. pods,nodes",
				name, strings.Join(constants.StorePartitionNames(), ", "))
		}
	}
	var out []constants.StorePartition
	for _, p := range constants.StorePartitions {
		for _, name := range names {
			if name == p.Name {
				out = append(out, p)
				break
			}
		}
	}
	if len(out) != len(names) {
		return nil, fmt.Errorf("--etcd-partitions=%s: a partition is given twice", strings.Join(names, ","))
	}
	return out, nil
}
