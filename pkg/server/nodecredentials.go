package server

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k1m.dev/k1m/pkg/agent"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/kubeconfig"
	"k1m.dev/k1m/pkg/pki"
)

// ownNodeCredentials gives the server's own node a kubelet client
// certificate signed here by the cluster CA, as the kubelet keeps one
// after its TLS bootstrap (a dated file and kubelet-client-current.pem
// linking to it, which the kubelet rotates with its own credentials), and
// the kubeconfig naming it. So a server's node never joins with a join
// token, and the approver refuses every join-token request for a server's
// node name: a join-token holder cannot take the name of a server that is
// removed or not yet joined. A certificate still valid is kept.
func (s *Server) ownNodeCredentials(c *certs, a *config.CompletedAgent) error {
	p := a.Paths
	if _, why := agent.OwnCredentials(p, time.Now()); why == nil {
		return nil
	}
	certPEM, keyPEM, err := c.cluster.Issue(pki.Leaf{CommonName: "system:node:" + s.nodeName, Organization: []string{"system:nodes"}, Client: true})
	if err != nil {
		return fmt.Errorf("issuing node %s's client certificate: %w", s.nodeName, err)
	}
	dated := filepath.Join(p.KubeletPKI, "kubelet-client-"+time.Now().UTC().Format("2006-01-02-15-04-05")+".pem")
	if err := fsutil.WriteFile(dated, append(certPEM, keyPEM...), 0o600); err != nil {
		return err
	}
	if err := replaceSymlink(filepath.Base(dated), p.KubeletClientCert); err != nil {
		return err
	}
	if err := fsutil.WriteFile(p.CAFile, c.cluster.CertPEM, 0o644); err != nil {
		return err
	}
	creds := kubeconfig.Credentials{CertFile: p.KubeletClientCert, KeyFile: p.KubeletClientCert}
	if err := kubeconfig.Write(p.KubeletKubeconfig, kubeconfig.Build(a.APIServerURL, c.cluster.CertPEM, "default-auth", creds)); err != nil {
		return err
	}
	s.step("node %s: client certificate issued by this server (%s); a server's node joins with no token", s.nodeName, p.KubeletClientCert)
	return nil
}

// replaceSymlink points link at target atomically: the kubelet's
// certificate store wants kubelet-client-current.pem to be a link.
func replaceSymlink(target, link string) error {
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}
