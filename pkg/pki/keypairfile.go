package pki

import (
	"crypto/tls"
	"os"
	"sync"
	"time"
)

// KeyPairFile is a TLS certificate and key kept in files that another
// program renews (kube-apiserver's serving pair, the kubelet's rotated
// client certificate): read again when the certificate file's
// modification time changes, so that a long-running listener or client
// follows a renewal without a restart.
type KeyPairFile struct {
	CertFile, KeyFile string // the same file when it holds both (the kubelet's)

	mu      sync.Mutex
	modTime time.Time
	cert    *tls.Certificate
}

// Get returns the pair, read again if the certificate file changed. A
// pair that does not load (caught half written) leaves the one read
// before in use, until the file changes again.
func (k *KeyPairFile) Get() (*tls.Certificate, error) {
	info, err := os.Stat(k.CertFile)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && info.ModTime().Equal(k.modTime) {
		return k.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(k.CertFile, k.KeyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, err
	}
	k.cert, k.modTime = &cert, info.ModTime()
	return k.cert, nil
}
