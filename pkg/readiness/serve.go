package readiness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"k1m.dev/k1m/pkg/pki"
)

// TLSFiles are what the listener serves with: the server's certificate
// and key (kube-apiserver's, signed by the cluster CA, which every agent
// trusts already), and the CA a client's certificate must chain to (the
// cluster CA, which signs every node's and admin's client certificate).
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
}

// ServerTLS is the listener's TLS: a client without a certificate of
// ClientCAFile is refused in the handshake. The serving certificate is
// read again when its file changes (a renewal), without a restart.
func ServerTLS(f TLSFiles) (*tls.Config, error) {
	caPEM, err := os.ReadFile(f.ClientCAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no certificate", f.ClientCAFile)
	}
	keys := &pki.KeyPairFile{CertFile: f.CertFile, KeyFile: f.KeyFile}
	if _, err := keys.Get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return keys.Get() },
	}, nil
}

// Serve serves h over TLS on l until ctx ends.
func Serve(ctx context.Context, l net.Listener, tlsCfg *tls.Config, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 5 * time.Second,
		// Agents keep their connection between checks (every 5 s).
		IdleTimeout: 90 * time.Second,
		// A failed handshake (a client without a certificate) is the
		// client's business, not a line in the server's log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(tls.NewListener(l, tlsCfg))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
