package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/server"
	"k1m.dev/k1m/pkg/serverbundle"
)

// tokenOptions are the flags every token verb shares.
type tokenOptions struct {
	kubeconfig string
	dataDir    string
}

func newTokenCommand() *cobra.Command {
	o := &tokenOptions{dataDir: config.DefaultServer().DataDir}
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list, delete and rotate join tokens (kubeadm's verbs); run with the admin kubeconfig",
		Long: "Join tokens are bootstrap tokens: an agent joins with one, then lives on its own certificate,\n" +
			"so deleting or expiring a token disturbs no node that joined with it.",
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig (default: DATA-DIR/admin.kubeconfig)")
	cmd.PersistentFlags().StringVar(&o.dataDir, "data-dir", o.dataDir, "the server's data directory (its join token is DATA-DIR/token)")
	cmd.AddCommand(o.createCommand(), o.listCommand(), o.deleteCommand(), o.rotateCommand())
	return cmd
}

func (o *tokenOptions) createCommand() *cobra.Command {
	ttl := join.DefaultTokenTTL
	var description string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a join token and print it (K1M<CA hash>::<id>.<secret>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, caPEM, err := o.client()
			if err != nil {
				return err
			}
			token, err := newToken(caPEM)
			if err != nil {
				return err
			}
			info, err := join.CreateToken(cmd.Context(), client, token, ttl, description)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), token.String())
			fmt.Fprintf(cmd.ErrOrStderr(), "token %s expires %s\n", info.ID, expiry(info.Expires, time.Now()))
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", ttl, "how long the token joins nodes (0: until deleted)")
	cmd.Flags().StringVar(&description, "description", "", "what the token is for, shown by list")
	return cmd
}

func (o *tokenOptions) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List join tokens (IDs, expiry, description; never the secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, _, err := o.client()
			if err != nil {
				return err
			}
			tokens, err := join.ListTokens(cmd.Context(), client)
			if err != nil {
				return err
			}
			printTokens(cmd.OutOrStdout(), tokens, time.Now())
			return nil
		},
	}
}

func printTokens(out io.Writer, tokens []join.TokenInfo, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tEXPIRES\tDESCRIPTION")
	for _, t := range tokens {
		fmt.Fprintf(w, "%s\t%s\t%s\n", t.ID, expiry(t.Expires, now), t.Description)
	}
	w.Flush()
}

func expiry(at, now time.Time) string {
	switch {
	case at.IsZero():
		return "never"
	case !at.After(now):
		return at.Format(time.RFC3339) + " (expired)"
	}
	return at.Format(time.RFC3339)
}

func (o *tokenOptions) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID|TOKEN...",
		Short: "Delete join tokens: they join nothing from then on; nodes that joined with them keep running",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := make([]string, len(args))
			for i, a := range args {
				id, err := join.TokenIDOf(a)
				if err != nil {
					return fmt.Errorf("token delete: %w", err)
				}
				ids[i] = id
			}
			client, _, err := o.client()
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := join.DeleteToken(cmd.Context(), client, id); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "token %s deleted\n", id)
				o.forgetServerToken(cmd.OutOrStdout(), id)
			}
			return nil
		},
	}
}

// forgetServerToken removes DATA-DIR/token when it holds the deleted
// token: the server makes a new one at its next start.
func (o *tokenOptions) forgetServerToken(out io.Writer, id string) {
	path := server.TokenFile(o.dataDir)
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if t, err := pki.ParseToken(string(data)); err == nil && t.TokenID() == id {
		if os.Remove(path) == nil {
			fmt.Fprintf(out, "%s held it and is removed: the server makes a new join token at its next start (or run k1m token rotate)\n", path)
		}
	}
}

func (o *tokenOptions) rotateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rotate",
		Short: "Replace the server's join token (DATA-DIR/token) and, on a server of several, the server token (DATA-DIR/server-token): the old ones join nothing and the old server token no longer opens the bundle the cluster stores; joined nodes are not disturbed",
		Long: "Replace the server's join token (DATA-DIR/token) and, on a server of several, the server token\n" +
			"(DATA-DIR/server-token), on every server; joined nodes are not disturbed.\n\n" +
			"The old tokens join nothing from then on, and the old server token no longer opens the bundle\n" +
			"of CA keys the cluster stores (kube-system/k1m-server-bootstrap): the same keys are sealed again\n" +
			"under a new random seal. It cannot retire a copy of that bundle made before (the ConfigMap as\n" +
			"read then, an etcd snapshot taken before): the old server token still opens it, and it holds\n" +
			"the same CA keys, which k1m never rotates. After a server token leaked, treat the CA keys as\n" +
			"exposed: only a new cluster (new CAs, every node joined to it) retires them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, caPEM, err := o.client()
			if err != nil {
				return err
			}
			return rotate(cmd.Context(), client, caPEM, o.dataDir, cmd.OutOrStdout())
		},
	}
}

// rotate creates the new join token first; on a server of several it then
// seals the shared files with a new seal and publishes them in place of
// every other bundle (from that write on, the old server token opens no
// bundle the cluster stores), writes both files, and only then deletes the
// old join tokens: a failure half-way leaves working tokens in DATA-DIR.
// The shared files are the same CA keys under the new seal, so a copy of
// the bundle made before still opens with the old seal: the message says
// so, for the operator to treat those keys as exposed.
func rotate(ctx context.Context, client kubernetes.Interface, caPEM []byte, dataDir string, out io.Writer) error {
	token, err := newToken(caPEM)
	if err != nil {
		return err
	}
	if _, err := join.CreateToken(ctx, client, token, 0, join.ServerTokenDescription); err != nil {
		return err
	}
	if server.IsClustered(dataDir) {
		if token.Seal, err = resealBundle(ctx, client, dataDir); err != nil {
			return err
		}
		if err := fsutil.WriteFile(server.ServerTokenFile(dataDir), []byte(token.String()+"\n"), 0o600); err != nil {
			return fmt.Errorf("the cluster's shared files are sealed with a new seal, but writing it failed (%w): run k1m token rotate again", err)
		}
		fmt.Fprintf(out, "new server token written to %s: the old one joins nothing and no longer opens the bundle the cluster stores; the other servers forget theirs within a minute\n", server.ServerTokenFile(dataDir))
		fmt.Fprintln(out, oldCopiesStillOpen)
	}
	path := server.TokenFile(dataDir)
	if err := fsutil.WriteFile(path, []byte(token.JoinToken().String()+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "new join token %s written to %s\n", token.TokenID(), path)
	tokens, err := join.ListTokens(ctx, client)
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if t.Description != join.ServerTokenDescription || t.ID == token.TokenID() {
			continue
		}
		if err := join.DeleteToken(ctx, client, t.ID); err != nil && !errors.Is(err, join.ErrTokenNotFound) {
			return err
		}
		fmt.Fprintf(out, "old join token %s deleted\n", t.ID)
	}
	fmt.Fprintln(out, "a server started with --token puts that token back at its next start: change the flag too")
	return nil
}

// oldCopiesStillOpen is what rotate cannot retire: the CA keys are
// unchanged, and the old seal opens every copy of the bundle made before.
const oldCopiesStillOpen = "the CA keys are unchanged (k1m does not rotate CAs): a copy of kube-system/" + join.ServerBootstrapName + " made before this rotation (the ConfigMap as read then, an etcd snapshot taken before) still opens with the old server token; if it leaked, treat the CA keys as exposed: only a new cluster retires them"

// resealBundle seals this server's shared files with a new seal and makes
// them the cluster's one bundle. The bundle's AES-256-GCM key is hashed
// from the seal (256 random bits, pki.NewSeal), so the new seal is a new
// key; the files it seals are the ones the old seal opened.
func resealBundle(ctx context.Context, client kubernetes.Interface, dataDir string) (string, error) {
	tlsDir := server.TLSDir(dataDir)
	// The bundle says whether the cluster encrypts Secrets, which a
	// joining server's flag must match: whether its servers said they do.
	keys, err := join.ReadSecretsKeys(ctx, client)
	if err != nil {
		return "", err
	}
	encrypted := false
	for _, a := range keys.Applied {
		encrypted = encrypted || a.Encrypt
	}
	bundle, err := serverbundle.Read(tlsDir, encrypted)
	if err != nil {
		return "", fmt.Errorf("--data-dir %s: %w (run k1m token rotate on a server)", dataDir, err)
	}
	seal, err := pki.NewSeal()
	if err != nil {
		return "", err
	}
	sealed, err := serverbundle.Seal(bundle, seal)
	if err != nil {
		return "", err
	}
	return seal, join.ReplaceBundle(ctx, client, serverbundle.SealID(seal), sealed)
}

func newToken(caPEM []byte) (pki.Token, error) {
	hash, err := pki.CAHash(caPEM)
	if err != nil {
		return pki.Token{}, fmt.Errorf("the kubeconfig's cluster CA: %w", err)
	}
	secret, err := pki.NewSecret()
	return pki.Token{CAHash: hash, Secret: secret}, err
}

// client connects with the admin kubeconfig and returns the cluster CA it
// trusts (the CA a new token pins).
func (o *tokenOptions) client() (kubernetes.Interface, []byte, error) {
	path := o.kubeconfig
	if path == "" {
		path = server.AdminKubeconfig(o.dataDir)
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w (run on a server, or give the admin kubeconfig)", path, err)
	}
	ctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok || raw.Clusters[ctx.Cluster] == nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: no current context with a cluster", path)
	}
	cluster := raw.Clusters[ctx.Cluster]
	caPEM := cluster.CertificateAuthorityData
	if len(caPEM) == 0 && cluster.CertificateAuthority != "" {
		if caPEM, err = os.ReadFile(filepath.Clean(cluster.CertificateAuthority)); err != nil {
			return nil, nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	return client, caPEM, err
}
