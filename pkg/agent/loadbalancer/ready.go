package loadbalancer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/readiness"
)

// ReadyCheck says where the node's credentials for the readiness check
// are. The files may appear after Start (the node joins after its
// balancer starts): until then the check is a TCP connection.
type ReadyCheck struct {
	// CAFile is the cluster CA kept at the join: it signs every server's
	// serving certificate.
	CAFile string
	// CertFile and KeyFile are the node's client certificate and key (the
	// kubelet's, one file for both, which the kubelet rotates).
	CertFile, KeyFile string
	// Port is the servers' readiness port; zero: constants.ServerReadyPort.
	Port int
}

// errNoCredentials says the node has no certificate to check with yet.
var errNoCredentials = errors.New("no client certificate yet")

// readyClient checks servers' readiness over one kept-alive connection
// per server: a check is a request, not a TLS handshake.
type readyClient struct {
	files ReadyCheck
	keys  *pki.KeyPairFile

	mu     sync.Mutex
	client *http.Client // nil until the files exist
}

func newReadyClient(files ReadyCheck) *readyClient {
	if files.Port == 0 {
		files.Port = constants.ServerReadyPort
	}
	return &readyClient{files: files, keys: &pki.KeyPairFile{CertFile: files.CertFile, KeyFile: files.KeyFile}}
}

// httpClient is the client, made once the CA and the certificate exist
// (errNoCredentials before).
func (r *readyClient) httpClient() (*http.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.client, nil
	}
	caPEM, err := os.ReadFile(r.files.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCredentials, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: %s holds no certificate", errNoCredentials, r.files.CAFile)
	}
	if _, err := r.keys.Get(); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCredentials, err)
	}
	r.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			RootCAs:    pool,
			// Read at each handshake: the kubelet rotates it.
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.keys.Get() },
		},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     3 * DefaultCheckInterval,
		DisableCompression:  true,
	}}
	return r.client, nil
}

// usable tells whether the node has what a readiness check needs.
func (r *readyClient) usable() bool {
	_, err := r.httpClient()
	return err == nil
}

// check asks the server at address (its kube-apiserver's host:port) for
// its readiness: nil on 200, else why not.
func (r *readyClient) check(ctx context.Context, address string) error {
	client, err := r.httpClient()
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	url := "https://" + net.JoinHostPort(host, strconv.Itoa(r.files.Port)) + readiness.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Read to the end (it is short): the connection is kept for the next check.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", readiness.Path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// close drops the kept connections.
func (r *readyClient) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
}

// jittered is d spread by ±20%, r in [0, 1) picking where: agents started
// together, as after a lease profile change, do not check in step.
func jittered(d time.Duration, r float64) time.Duration { return readiness.Jittered(d, r) }
