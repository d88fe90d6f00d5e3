package server

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/pki"
)

// certs are the files the control plane runs with, under DATA-DIR/tls.
// Each trust domain has its own CA, as kubeadm and k3s keep them, so that a
// certificate from one domain is worthless in another: above all, what
// kube-controller-manager signs through the CSR API (cluster CA) opens no
// etcd (etcd CA), and a kubelet's serving certificate (kubelet serving CA)
// is no API server to a pod or an agent.
type certs struct {
	dir string
	// cluster signs kube-apiserver's serving certificate and every client
	// of kube-apiserver (admin, components, nodes through the CSR API);
	// kube-apiserver and kubelets trust it for clients, pods and agents
	// for the API server.
	cluster authority
	// kubeletServing signs the kubelets' serving certificates (the
	// kubernetes.io/kubelet-serving signer); only kube-apiserver trusts it,
	// and only for kubelets. A node chooses the names in its serving
	// request, so a certificate from this CA must never be trusted where
	// the cluster CA's are: a node that slipped the API server's name past
	// the approver would otherwise pass for kube-apiserver in every pod.
	kubeletServing authority
	// kubeletServingMade: this start made the kubelet serving CA (a data
	// directory from before it); on a server of several it must then be
	// the cluster's (checkKubeletServingCA).
	kubeletServingMade bool
	// etcd signs both etcds' serving and peer certificates and their one
	// client, kube-apiserver; the etcds trust nothing else.
	etcd authority
	// frontProxy signs the client certificate kube-apiserver presents to
	// aggregated API servers; only request-header authentication trusts it.
	frontProxy authority

	apiserver, kubeletClient, admin, superAdmin, controllerManager, scheduler pair // cluster CA
	etcdServer, etcdClient                                                    pair // etcd CA
	frontProxyClient                                                          pair // front-proxy CA
	saKey, saPub                                                              string
}

// authority is a CA with the paths of its files.
type authority struct {
	*pki.Authority
	cert, key string
}

type pair struct{ cert, key string }

// caSpecs are the server's CAs: cluster, etcd, front proxy, kubelet
// serving (the order of the certs fields loadOrIssueCerts fills), each
// with its file name in DATA-DIR/tls and its common name.
var caSpecs = []struct{ name, commonName string }{
	{"ca", "k1m-ca"},
	{"etcd-ca", "k1m-etcd-ca"},
	{"front-proxy-ca", "k1m-front-proxy-ca"},
	{constants.KubeletServingCA, "k1m-kubelet-serving-ca"},
}

// servingNames are what kube-apiserver's serving certificate must cover.
type servingNames struct {
	IPs      []net.IP
	DNSNames []string
}

// apiserverNames lists every name clients may use: the host's addresses,
// loopback, the kubernetes Service IP and DNS names, the node name.
func (s *Server) apiserverNames() servingNames {
	return servingNames{
		IPs: append(append([]net.IP{}, s.hostIPs...), net.IPv6loopback, s.cfg.KubernetesServiceIP),
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + strings.TrimSuffix(s.cfg.ClusterDomain, "."), s.nodeName},
	}
}

// phasePKI creates or reuses the CAs and every certificate.
func (s *Server) phasePKI() (*certs, error) {
	return loadOrIssueCerts(TLSDir(s.cfg.DataDir), s.apiserverNames())
}

// loadOrIssueCerts keeps the PKI in dir. What exists is reused: a CA is
// never regenerated (pki.LoadOrCreateCA), a leaf is reissued only when it
// no longer fits (another CA, a missing SAN, near expiry). On a data
// directory from before the CAs were split (one ca.crt signed everything)
// this creates the etcd and front-proxy CAs and reissues just the leaves
// they now sign; the cluster CA, which every node trusts, stays. On one
// from before the kubelet serving CA, this creates it; each node's agent
// then drops its cluster-CA serving certificate and asks for a new one.
func loadOrIssueCerts(dir string, names servingNames) (*certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &certs{dir: dir}
	into := []*authority{&c.cluster, &c.etcd, &c.frontProxy, &c.kubeletServing} // in caSpecs' order
	c.kubeletServingMade = !fsutil.Exists(filepath.Join(dir, constants.KubeletServingCA+".crt"))
	for i, spec := range caSpecs {
		ca, err := pki.LoadOrCreateCA(dir, spec.name, spec.commonName)
		if err != nil {
			return nil, err
		}
		*into[i] = authority{Authority: ca, cert: filepath.Join(dir, spec.name+".crt"), key: filepath.Join(dir, spec.name+".key")}
	}
	for _, l := range c.leaves(names) {
		cert, key, err := l.ca.LoadOrIssue(dir, l.leaf)
		if err != nil {
			return nil, fmt.Errorf("certificate %s: %w", l.leaf.Name, err)
		}
		*l.into = pair{cert, key}
	}
	var err error
	c.saKey, c.saPub, err = pki.LoadOrCreateKey(filepath.Join(dir, "service-account.key"))
	if err != nil {
		return nil, err
	}
	return c, nil
}

type leafSpec struct {
	into *pair
	ca   *pki.Authority
	leaf pki.Leaf
}

// leaves are every leaf certificate, with the CA that signs it.
func (c *certs) leaves(names servingNames) []leafSpec {
	return []leafSpec{
		{&c.apiserver, c.cluster.Authority, pki.Leaf{Name: "apiserver", CommonName: "kube-apiserver", Server: true, DNSNames: names.DNSNames, IPs: names.IPs}},
		{&c.kubeletClient, c.cluster.Authority, pki.Leaf{Name: "apiserver-kubelet-client", CommonName: "kube-apiserver-kubelet-client", Organization: []string{"k1m:kubelet-api-admins"}, Client: true}},
		// The operator's admin is cluster-admin through RBAC (revocable);
		// the super-admin (system:masters) is the server's own and the
		// break-glass credential.
		{&c.admin, c.cluster.Authority, pki.Leaf{Name: "admin", CommonName: "k1m-admin", Organization: []string{constants.AdminGroup}, Client: true}},
		{&c.superAdmin, c.cluster.Authority, pki.Leaf{Name: "super-admin", CommonName: "k1m-super-admin", Organization: []string{"system:masters"}, Client: true}},
		{&c.controllerManager, c.cluster.Authority, pki.Leaf{Name: "controller-manager", CommonName: "system:kube-controller-manager", Client: true}},
		{&c.scheduler, c.cluster.Authority, pki.Leaf{Name: "scheduler", CommonName: "system:kube-scheduler", Client: true}},
		// Every address of the host: other servers' etcds reach it there
		// (peer and client TLS) when it is one of several.
		{&c.etcdServer, c.etcd.Authority, pki.Leaf{Name: "etcd-server", CommonName: "etcd", Server: true, Client: true, DNSNames: []string{"localhost"}, IPs: names.IPs}},
		{&c.etcdClient, c.etcd.Authority, pki.Leaf{Name: "apiserver-etcd-client", CommonName: "kube-apiserver-etcd-client", Client: true}},
		{&c.frontProxyClient, c.frontProxy.Authority, pki.Leaf{Name: "front-proxy-client", CommonName: "front-proxy-client", Client: true}},
	}
}
