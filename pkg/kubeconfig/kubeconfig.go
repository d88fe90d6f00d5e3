// Package kubeconfig writes the kubeconfig files k1m hands to its
// components, its agents and its administrator.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"k1m.dev/k1m/pkg/fsutil"
)

// Credentials are either a client certificate (files, so that rotation is
// picked up) or a bearer token.
type Credentials struct {
	CertFile, KeyFile string
	Token             string
}

// Build returns a kubeconfig for server, trusting caPEM.
func Build(server string, caPEM []byte, user string, creds Credentials) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k1m"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: creds.CertFile, ClientKey: creds.KeyFile, Token: creds.Token}
	cfg.Contexts["k1m"] = &clientcmdapi.Context{Cluster: "k1m", AuthInfo: user}
	cfg.CurrentContext = "k1m"
	return cfg
}

// Write writes cfg to path atomically, readable by its owner only.
func Write(path string, cfg *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// RESTConfig loads a kubeconfig file as a client configuration.
func RESTConfig(path string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", path)
}
