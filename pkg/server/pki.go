package server

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/pkg/pki"
)

// certs are the files the control plane runs with, under DATA-DIR/tls.
type certs struct {
	dir                    string
	ca                     *pki.Authority
	caCert, caKey          string
	apiserver              pair
	etcdServer, etcdClient pair
	kubeletClient          pair // kube-apiserver -> kubelets
	frontProxyClient       pair // kube-apiserver -> aggregated API servers
	admin                  pair
	controllerManager      pair
	scheduler              pair
	saKey, saPub           string
}

type pair struct{ cert, key string }

// phasePKI creates or reuses the cluster CA and every certificate; the
// serving certificate names every address clients may use.
func (s *Server) phasePKI() (*certs, error) {
	dir := filepath.Join(s.cfg.DataDir, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.LoadOrCreateCA(dir, "ca", "k1m-ca")
	if err != nil {
		return nil, err
	}
	c := &certs{dir: dir, ca: ca, caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key")}
	kubernetesIP, err := s.cfg.ServiceIP(1)
	if err != nil {
		return nil, err
	}
	ips := append(s.hostIPs, net.IPv6loopback, kubernetesIP)
	dnsNames := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc." + strings.TrimSuffix(s.cfg.ClusterDomain, "."), s.nodeName}
	leaves := []struct {
		into *pair
		leaf pki.Leaf
	}{
		{&c.apiserver, pki.Leaf{Name: "apiserver", CommonName: "kube-apiserver", Server: true, DNSNames: dnsNames, IPs: ips}},
		{&c.etcdServer, pki.Leaf{Name: "etcd-server", CommonName: "etcd", Server: true, Client: true, DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv6loopback}}},
		{&c.etcdClient, pki.Leaf{Name: "apiserver-etcd-client", CommonName: "kube-apiserver-etcd-client", Client: true}},
		{&c.kubeletClient, pki.Leaf{Name: "apiserver-kubelet-client", CommonName: "kube-apiserver-kubelet-client", Organization: []string{"k1m:kubelet-api-admins"}, Client: true}},
		{&c.frontProxyClient, pki.Leaf{Name: "front-proxy-client", CommonName: "front-proxy-client", Client: true}},
		{&c.admin, pki.Leaf{Name: "admin", CommonName: "k1m-admin", Organization: []string{"system:masters"}, Client: true}},
		{&c.controllerManager, pki.Leaf{Name: "controller-manager", CommonName: "system:kube-controller-manager", Client: true}},
		{&c.scheduler, pki.Leaf{Name: "scheduler", CommonName: "system:kube-scheduler", Client: true}},
	}
	for _, l := range leaves {
		cert, key, err := ca.LoadOrIssue(dir, l.leaf)
		if err != nil {
			return nil, fmt.Errorf("certificate %s: %w", l.leaf.Name, err)
		}
		*l.into = pair{cert, key}
	}
	c.saKey, c.saPub, err = pki.LoadOrCreateKey(filepath.Join(dir, "service-account.key"))
	if err != nil {
		return nil, err
	}
	return c, nil
}
