package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
// removed or not yet joined. A certificate still valid is kept. Issuing
// one for a name that is a Node already is refused: a join-token holder
// may have registered the name before this server joined, and the
// server's node would take over that Node and its bound pod route.
func (s *Server) ownNodeCredentials(ctx context.Context, client kubernetes.Interface, c *certs, a *config.CompletedAgent) error {
	p := a.Paths
	if _, why := agent.OwnCredentials(p, time.Now()); why == nil {
		return nil
	}
	if err := s.nodeNameFree(ctx, client); err != nil {
		return err
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

// nodeNameFree refuses a node name that is a Node already, naming what to
// do. One GET, at a server's first start (and after its node's
// credentials were lost).
func (s *Server) nodeNameFree(ctx context.Context, client kubernetes.Interface) error {
	n, err := client.CoreV1().Nodes().Get(ctx, s.nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("checking that node name %s is free: %w", s.nodeName, err)
	}
	// Not even when its status names this server's address: a node writes
	// its own status, and the one that registered the name would keep its
	// credentials for it.
	return fmt.Errorf("--node-name %s: the cluster has a Node of that name already (registered %s), and this server's node has no credentials of its own yet: it may have joined with a join token before this server did. Delete it if it is a stale node of this machine (k1m kubectl delete node %s), or start this server with another --node-name",
		s.nodeName, n.CreationTimestamp.UTC().Format(time.RFC3339), s.nodeName)
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
