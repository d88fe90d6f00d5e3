package integration

import (
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/testutil"
)

// testCertificates checks k1m certificate check on the running server, then
// rotates kube-apiserver's and etcd's serving certificates and wants each
// listener to serve the new one (they read their files again: no restart).
func testCertificates(t *testing.T, c *cluster) {
	out, err := exec.Command(c.k1m, "certificate", "check", "--data-dir", c.serverData()).CombinedOutput()
	if err != nil {
		t.Fatalf("certificate check: %v\n%s", err, out)
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		f := strings.Fields(line)
		files = append(files, filepath.Base(f[0]))
		if status := strings.Join(f[4:], " "); !strings.HasPrefix(status, "ok, 36") && !strings.HasPrefix(status, "CA, 36") {
			t.Errorf("%s: status %q, want ok with a year left (or a CA's ten)", f[0], status)
		}
	}
	want := []string{"admin.crt", "apiserver-etcd-client.crt", "apiserver-kubelet-client.crt", "apiserver.crt", "ca.crt", "controller-manager.crt",
		"etcd-ca.crt", "etcd-server.crt", "front-proxy-ca.crt", "front-proxy-client.crt", "kubelet-serving-ca.crt", "scheduler.crt", "super-admin.crt", "kubelet-client-current.pem", "kubelet-server-current.pem"}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("certificate check lists %v, want %v", files, want)
	}

	tlsDir := filepath.Join(c.serverData(), "tls")
	if out, err := exec.Command(c.k1m, "certificate", "rotate", "--data-dir", c.serverData(), "apiserver", "etcd-server").CombinedOutput(); err != nil ||
		string(out) != "certificate apiserver reissued\ncertificate etcd-server reissued\n" {
		t.Fatalf("certificate rotate: %v\n%s", err, out)
	}
	client, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "apiserver-etcd-client.crt"), filepath.Join(tlsDir, "apiserver-etcd-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		file, addr string
		client     []tls.Certificate
	}{
		{"apiserver.crt", "[fddf:4035:b520::1]:6443", nil},
		{"etcd-server.crt", "[::1]:2379", []tls.Certificate{client}},
	} {
		want := fileSerial(t, filepath.Join(tlsDir, l.file))
		testutil.Eventually(t, 90*time.Second, l.addr+" serving the rotated "+l.file, func() error {
			got, err := servedSerial(l.addr, l.client)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("serves serial %s, the file has %s", got, want)
			}
			return nil
		})
	}
	if out, err := c.kubectl("get", "nodes"); err != nil {
		t.Errorf("kubectl after the rotation: %v\n%s", err, out)
	}
}

func fileSerial(t *testing.T, path string) string {
	t.Helper()
	cert, err := pki.ReadCertFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

func servedSerial(addr string, client []tls.Certificate) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, Certificates: client})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}
