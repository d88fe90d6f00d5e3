package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/server"
)

func newCertificateCommand() *cobra.Command {
	dataDir := config.DefaultServer().DataDir
	cmd := &cobra.Command{
		Use:   "certificate",
		Short: "Check the expiry of a server's certificates, or reissue them now (k3s's verbs)",
		Long: "A server renews its leaf certificates by itself, 90 days before they expire, at start and every hour\n" +
			"while it runs. The CAs (ten years) are never rotated by k1m.",
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", dataDir, "the server's data directory (certificates in DATA-DIR/tls)")
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "List every certificate of the server and of its node, with its expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			infos, err := serverCertificates(dataDir)
			if err != nil {
				return err
			}
			printCertificates(cmd.OutOrStdout(), infos, time.Now())
			return nil
		},
	}, &cobra.Command{
		Use:   "rotate [NAME...]",
		Short: "Reissue the named leaf certificates of DATA-DIR/tls now (all when none is named), server running or not",
		Long: "Each certificate gets a new key and a year's validity, with the same names and usages, signed by its\n" +
			"own CA. A running server's components pick them up: kube-apiserver's serving certificate at once,\n" +
			"the etcds' on each new connection, the kubeconfig clients within 5 minutes.",
		RunE: func(cmd *cobra.Command, names []string) error {
			return server.Rotate(dataDir, names, func(name string) {
				fmt.Fprintf(cmd.OutOrStdout(), "certificate %s reissued\n", name)
			})
		},
	})
	return cmd
}

// serverCertificates are every certificate file of DATA-DIR/tls and of
// the server's own node (the kubelet's client and serving certificates).
func serverCertificates(dataDir string) ([]pki.CertInfo, error) {
	paths, _ := filepath.Glob(filepath.Join(server.TLSDir(dataDir), "*.crt"))
	if len(paths) == 0 {
		return nil, fmt.Errorf("--data-dir %s: no certificates in %s (has a server run with this data directory?)", dataDir, server.TLSDir(dataDir))
	}
	sort.Strings(paths)
	node := config.NewAgentPaths(datadir.Server(dataDir).Agent(), "")
	paths = append(paths, node.KubeletClientCert, node.KubeletServingCert)
	var out []pki.CertInfo
	for _, p := range paths {
		info, err := pki.Inspect(p)
		if err != nil {
			continue // the node's certificates exist only once it joined
		}
		out = append(out, info)
	}
	return out, nil
}

func printCertificates(out io.Writer, infos []pki.CertInfo, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "FILE\tSUBJECT\tISSUER\tEXPIRES\tSTATUS")
	for _, c := range infos {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Path, c.Subject, c.Issuer, c.NotAfter.UTC().Format(time.RFC3339), certStatus(c, now))
	}
	w.Flush()
}

func certStatus(c pki.CertInfo, now time.Time) string {
	left := c.NotAfter.Sub(now)
	switch {
	case left <= 0:
		return "EXPIRED"
	case c.IsCA:
		return fmt.Sprintf("CA, %d days left", int(left.Hours()/24))
	case left < pki.RenewBefore:
		return fmt.Sprintf("renewal due, %d days left", int(left.Hours()/24))
	}
	return fmt.Sprintf("ok, %d days left", int(left.Hours()/24))
}
