package agent

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/pki"
)

// OwnCredentials tells whether the node can start on its own client
// certificate, and when it expires; see ownCredentials.
func OwnCredentials(p config.AgentPaths, now time.Time) (expires time.Time, why error) {
	return ownCredentials(p, now)
}

// ownCredentials tells whether the node can start on the client
// certificate it got at its join (kept and rotated by the kubelet): it
// must exist, chain to the cluster CA kept at the join, and be valid for
// a while yet. Otherwise it says why, and the node joins again with a
// token.
func ownCredentials(p config.AgentPaths, now time.Time) (expires time.Time, why error) {
	if _, err := os.Stat(p.KubeletKubeconfig); err != nil {
		return time.Time{}, fmt.Errorf("no kubeconfig of its own (%s)", p.KubeletKubeconfig)
	}
	cert, err := pki.ReadCertFile(p.KubeletClientCert)
	var missing *fs.PathError
	if errors.As(err, &missing) {
		return time.Time{}, fmt.Errorf("no client certificate of its own (%s)", p.KubeletClientCert)
	}
	if err != nil {
		return time.Time{}, err
	}
	caPEM, err := os.ReadFile(p.CAFile)
	if err != nil {
		return time.Time{}, fmt.Errorf("no cluster CA kept (%s)", p.CAFile)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return time.Time{}, fmt.Errorf("%s holds no certificate", p.CAFile)
	}
	// Checked a minute ahead: the kubelet must have time to connect.
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now.Add(time.Minute), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return time.Time{}, fmt.Errorf("its client certificate %s is not usable: %v", p.KubeletClientCert, err)
	}
	return cert.NotAfter, nil
}

// forgetCredentials removes what a failed or expired identity left, so
// that the kubelet bootstraps afresh.
func forgetCredentials(p config.AgentPaths) error {
	for _, f := range []string{p.KubeletKubeconfig, p.KubeletClientCert} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// dropClusterCAServingCert removes a kubelet serving certificate signed by
// the cluster CA, which servers issued before kubelet serving certificates
// got a CA of their own: kube-apiserver no longer trusts it for kubelets,
// and pods would take it for kube-apiserver. The kubelet then asks for a
// new one (its serving TLS bootstrap). It tells whether it removed one;
// a missing or unreadable certificate is the kubelet's to replace.
func dropClusterCAServingCert(p config.AgentPaths) (bool, error) {
	cert, err := pki.ReadCertFile(p.KubeletServingCert)
	if err != nil {
		return false, nil
	}
	ca, err := pki.ReadCertFile(p.CAFile)
	if err != nil || cert.CheckSignatureFrom(ca) != nil {
		return false, nil
	}
	if err := os.Remove(p.KubeletServingCert); err != nil {
		return false, err
	}
	return true, nil
}
