package testutil

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/grpclog"
	"k8s.io/client-go/rest"
)

// A kubeconfig's files are read into the config, and their names dropped,
// so no client of it reloads them.
func TestRESTConfigReadsTheFilesIn(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"ca.crt": "CA PEM", "admin.crt": "CERT PEM", "admin.key": "KEY PEM"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://[::1]:6443", certificate-authority: ` + filepath.Join(dir, "ca.crt") + `}}]
users: [{name: u, user: {client-certificate: ` + filepath.Join(dir, "admin.crt") + `, client-key: ` + filepath.Join(dir, "admin.key") + `}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := RESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	want := rest.TLSClientConfig{CAData: []byte("CA PEM"), CertData: []byte("CERT PEM"), KeyData: []byte("KEY PEM")}
	if got.Host != "https://[::1]:6443" || !reflect.DeepEqual(got.TLSClientConfig, want) {
		t.Errorf("RESTConfig: host %q, TLS %+v; want https://[::1]:6443, %+v", got.Host, got.TLSClientConfig, want)
	}
	if _, err := RESTConfig(filepath.Join(dir, "missing.kubeconfig")); err == nil {
		t.Error("RESTConfig of a missing file: no error")
	}
}

// After QuietGRPC, grpc's warnings go nowhere and its errors still reach
// standard error.
func TestQuietGRPCKeepsErrorsOnly(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	QuietGRPC()
	os.Stderr = stderr
	grpclog.Info("an info line")
	grpclog.Warning("a reconnect failed")
	grpclog.Error("an error line")
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.HasSuffix(lines[0], "an error line") {
		t.Errorf("grpc logged %q, want only the error line", out)
	}
}
