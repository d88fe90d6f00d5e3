package agent

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"k1m.dev/k1m/pkg/kubeconfig"
)

// kubeletWritten is the kubeconfig the kubelet writes after its TLS
// bootstrap (k8s.io/kubernetes pkg/kubelet/certificate/bootstrap,
// writeKubeconfigFromBootstrapping): the bootstrap kubeconfig's server and
// CA, the rotated certificate's file.
func kubeletWritten(server string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("CA")}
	cfg.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: "/d/kubelet-pki/kubelet-client-current.pem", ClientKey: "/d/kubelet-pki/kubelet-client-current.pem"}
	cfg.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}
	cfg.CurrentContext = "default-context"
	return cfg
}

// A node that joined before agents had a load balancer: its kubelet's
// kubeconfig names --server, and is made to name the balancer, the rest
// unchanged.
func TestResumedNodeKubeconfigNamesTheBalancer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.kubeconfig")
	if err := kubeconfig.Write(path, kubeletWritten("https://[fddf:4035:b520::1]:6443")); err != nil {
		t.Fatal(err)
	}
	was, err := pointKubeconfigAt(path, "https://[::1]:6444")
	if was != "https://[fddf:4035:b520::1]:6443" || err != nil {
		t.Fatalf("got %q, %v; want the old server", was, err)
	}
	// Compared as written, byte for byte.
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := clientcmd.Write(*kubeletWritten("https://[::1]:6444"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("kubeconfig after the rewrite\n got %s\nwant %s", got, want)
	}
	// Already right: left alone.
	if was, err := pointKubeconfigAt(path, "https://[::1]:6444"); was != "" || err != nil {
		t.Errorf("second rewrite: %q, %v; want nothing done", was, err)
	}
	if _, err := pointKubeconfigAt(filepath.Join(t.TempDir(), "missing"), "https://[::1]:6444"); err == nil {
		t.Error("a missing kubeconfig: no error")
	}
}
