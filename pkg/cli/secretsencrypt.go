package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/secretsenc"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/serverbundle"
)

func newSecretsEncryptCommand() *cobra.Command {
	o := &tokenOptions{dataDir: config.DefaultServer().DataDir}
	cmd := &cobra.Command{
		Use:   "secrets-encrypt",
		Short: "Prepare and rotate the Secrets encryption key, or show which keys each server runs with; run on a server",
		Long: "The Secrets encryption key set is one value for the whole cluster: every server adopts it at its\n" +
			"start. A rotation: prepare (a new key every server reads with), restart every server one at a\n" +
			"time, rotate (the new key writes), restart every server one at a time; then rewrite the Secrets\n" +
			"(docs/operations.md). Old keys are kept: Secrets written with them stay readable.",
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig (default: DATA-DIR/admin.kubeconfig)")
	cmd.PersistentFlags().StringVar(&o.dataDir, "data-dir", o.dataDir, "the server's data directory (its cluster CA key is DATA-DIR/tls/ca.key)")
	run := func(change func(secretsenc.KeySet, join.SecretsKeysState) (secretsenc.KeySet, error), done string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			set, err := o.changeKeys(cmd.Context(), change)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: keys %s, write key %s\n", done, strings.Join(set.Names(), ", "), set.Write)
			fmt.Fprintln(cmd.OutOrStdout(), "restart every server, one at a time, to run with them")
			return nil
		}
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "prepare",
		Short: "Add a new key every server reads with and none writes with yet (with no keys yet: the first key, which writes once servers run with --secrets-encryption)",
		Args:  cobra.NoArgs,
		RunE: run(func(set secretsenc.KeySet, _ join.SecretsKeysState) (secretsenc.KeySet, error) {
			return secretsenc.PrepareKey(set)
		}, "prepared"),
	}, &cobra.Command{
		Use:   "rotate",
		Short: "Make the prepared key the write key; refused until every server runs with it",
		Args:  cobra.NoArgs,
		RunE:  run(rotateWhenEveryServerReads, "rotated"),
	}, &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's keys and those each server runs with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.status(cmd.Context(), cmd.OutOrStdout())
		},
	})
	return cmd
}

// rotateWhenEveryServerReads rotates only once every server of the cluster
// reads with the prepared key: a Secret the new key writes must be
// readable through every server from the first write.
func rotateWhenEveryServerReads(set secretsenc.KeySet, st join.SecretsKeysState) (secretsenc.KeySet, error) {
	p, ok := set.Pending()
	if !ok {
		return secretsenc.KeySet{}, fmt.Errorf("%w: run k1m secrets-encrypt prepare, restart every server, then rotate", secretsenc.ErrNoKeyPrepared)
	}
	var behind []string
	for _, node := range st.Servers {
		if !st.Applied[node].Has(p.Name) {
			behind = append(behind, node)
		}
	}
	if len(behind) > 0 {
		return secretsenc.KeySet{}, fmt.Errorf("the prepared key %s is not read by server %s yet: restart each, then rotate (k1m secrets-encrypt status shows each server's keys)", p.Name, strings.Join(behind, ", "))
	}
	return secretsenc.RotateKey(set)
}

// changeKeys applies change to the cluster's key set (a lone server: to
// its own, DATA-DIR/tls/secrets-encryption-keys.json) and returns the set
// written; a refusal writes nothing.
func (o *tokenOptions) changeKeys(ctx context.Context, change func(secretsenc.KeySet, join.SecretsKeysState) (secretsenc.KeySet, error)) (secretsenc.KeySet, error) {
	if !server.IsClustered(o.dataDir) {
		path := server.SecretsKeySetFile(o.dataDir)
		set, err := secretsenc.LoadKeySet(path, server.SecretsKeyFile(o.dataDir))
		if err != nil {
			return secretsenc.KeySet{}, err
		}
		if set, err = change(set, join.SecretsKeysState{}); err != nil {
			return secretsenc.KeySet{}, err
		}
		return set, secretsenc.SaveKeySet(path, set)
	}
	caKey, err := o.caKey()
	if err != nil {
		return secretsenc.KeySet{}, err
	}
	client, _, err := o.client()
	if err != nil {
		return secretsenc.KeySet{}, err
	}
	return changeClusterKeys(ctx, client, caKey, change)
}

func changeClusterKeys(ctx context.Context, client kubernetes.Interface, caKey []byte, change func(secretsenc.KeySet, join.SecretsKeysState) (secretsenc.KeySet, error)) (secretsenc.KeySet, error) {
	st, err := join.ReadSecretsKeys(ctx, client)
	if err != nil {
		return secretsenc.KeySet{}, err
	}
	var written secretsenc.KeySet
	err = join.UpdateSecretsKeys(ctx, client, "", func(current []byte) ([]byte, join.AppliedKeys, error) {
		set, err := openKeys(current, caKey)
		if err != nil {
			return nil, join.AppliedKeys{}, err
		}
		if written, err = change(set, st); err != nil {
			return nil, join.AppliedKeys{}, err
		}
		sealed, err := serverbundle.SealKeys(written, caKey)
		return sealed, join.AppliedKeys{}, err
	})
	return written, err
}

func (o *tokenOptions) caKey() ([]byte, error) {
	path := filepath.Join(server.TLSDir(o.dataDir), "ca.key")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w (run on a server)", o.dataDir, err)
	}
	return data, nil
}

func openKeys(sealed, caKey []byte) (secretsenc.KeySet, error) {
	if sealed == nil {
		return secretsenc.KeySet{}, nil
	}
	return serverbundle.OpenKeys(sealed, caKey)
}

func (o *tokenOptions) status(ctx context.Context, out io.Writer) error {
	if !server.IsClustered(o.dataDir) {
		set, err := secretsenc.LoadKeySet(server.SecretsKeySetFile(o.dataDir), server.SecretsKeyFile(o.dataDir))
		if err != nil {
			return err
		}
		printKeys(out, set)
		return nil
	}
	caKey, err := o.caKey()
	if err != nil {
		return err
	}
	client, _, err := o.client()
	if err != nil {
		return err
	}
	return clusterStatus(ctx, client, caKey, out)
}

func clusterStatus(ctx context.Context, client kubernetes.Interface, caKey []byte, out io.Writer) error {
	st, err := join.ReadSecretsKeys(ctx, client)
	if err != nil {
		return err
	}
	set, err := openKeys(st.Sealed, caKey)
	if err != nil {
		return err
	}
	printKeys(out, set)
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "SERVER\tENCRYPTS\tWRITE KEY\tKEYS")
	for _, node := range st.Servers {
		a, ok := st.Applied[node]
		if !ok {
			fmt.Fprintf(w, "%s\t?\t?\t(not recorded: a build before key sets)\n", node)
			continue
		}
		fmt.Fprintf(w, "%s\t%v\t%s\t%s\n", node, a.Encrypt, a.Write, strings.Join(a.Keys, ","))
	}
	return w.Flush()
}

func printKeys(out io.Writer, set secretsenc.KeySet) {
	if set.Empty() {
		fmt.Fprintln(out, "no Secrets encryption keys")
		return
	}
	for _, k := range set.Keys {
		role := "reads"
		if k.Name == set.Write {
			role = "writes"
		} else if p, ok := set.Pending(); ok && p.Name == k.Name {
			role = "prepared (reads; rotate makes it write)"
		}
		fmt.Fprintf(out, "key %s: %s\n", k.Name, role)
	}
}
