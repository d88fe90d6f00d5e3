package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"k1m.dev/k1m/pkg/pki"
)

// handedOut are the ports freePortPair gave: the tests that run in
// parallel start their members after it returns, so a port free when
// asked must not be given twice.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePortPair finds a port p on ::1 with p+1 free too (client and peer),
// neither given to another test of the run.
func freePortPair(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if handedOut.ports[port] || handedOut.ports[port+1] {
			continue
		}
		if l2, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port+1))); err == nil {
			l2.Close()
			handedOut.ports[port], handedOut.ports[port+1] = true, true
			return port
		}
	}
	t.Fatal("no free port pair on ::1")
	return 0
}

func certs(t *testing.T, dir string) (TLS, TLS) {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(dir, "etcd-ca", "k1m-etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.LoadOrIssue(dir, pki.Leaf{Name: "etcd-server", CommonName: "etcd", Server: true, Client: true,
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv6loopback, net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := ca.LoadOrIssue(dir, pki.Leaf{Name: "apiserver-etcd-client", CommonName: "kube-apiserver", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "etcd-ca.crt")
	return TLS{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile}, TLS{CertFile: cliCert, KeyFile: cliKey, CAFile: caFile}
}

func client(t *testing.T, m Member, c TLS) *clientv3.Client {
	t.Helper()
	tlsCfg, err := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL()}, TLS: tlsCfg, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestDurableAndNoFsyncMembers(t *testing.T) {
	dir := t.TempDir()
	serverTLS, clientTLS := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	members := []Member{
		{Name: "durable", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS},
		{Name: "nofsync", DataDir: filepath.Join(dir, "etcd-nofsync"), Host: "::1", NoFsync: true, TLS: serverTLS},
	}
	members[1].Port = freePortPair(t)
	for _, m := range members {
		r, err := Start(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
		if r.NoFsync() != m.NoFsync {
			t.Errorf("%s: UnsafeNoFsync %v, want %v", m.Name, r.NoFsync(), m.NoFsync)
		}
		cli := client(t, m, clientTLS)
		if _, err := cli.Put(ctx, "/k1m/test", m.Name); err != nil {
			t.Fatalf("%s: put: %v", m.Name, err)
		}
		got, err := cli.Get(ctx, "/k1m/test")
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != m.Name {
			t.Fatalf("%s: get: %v %v", m.Name, got, err)
		}
		if _, err := os.Stat(filepath.Join(m.DataDir, "member")); err != nil {
			t.Errorf("%s: no data in %s: %v", m.Name, m.DataDir, err)
		}
	}
}

func TestClientWithoutCertificateIsRefused(t *testing.T) {
	dir := t.TempDir()
	serverTLS, _ := certs(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := Member{Name: "durable", DataDir: filepath.Join(dir, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS}
	r, err := Start(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	caPEM, _ := os.ReadFile(serverTLS.CAFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL()}, TLS: &tls.Config{RootCAs: pool}, DialTimeout: 3 * time.Second})
	if err == nil {
		defer cli.Close()
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := cli.Put(short, "/k1m/anonymous", "x"); err == nil {
			t.Fatal("a client without a certificate could write")
		}
	}
}

func TestStartReportsBadDataDir(t *testing.T) {
	dir := t.TempDir()
	serverTLS, _ := certs(t, dir)
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, []byte("x"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Start(ctx, Member{Name: "durable", DataDir: filepath.Join(blocker, "etcd"), Host: "::1", Port: freePortPair(t), TLS: serverTLS})
	if err == nil {
		t.Fatal("etcd started with a data dir under a regular file")
	}
}
