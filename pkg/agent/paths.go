package agent

import "path/filepath"

// paths lays out one node's files under its data and run directories.
type paths struct{ data, run string }

func (p paths) caFile() string        { return filepath.Join(p.data, "ca.crt") }
func (p paths) kubeletRoot() string   { return filepath.Join(p.data, "kubelet") }
func (p paths) kubeletPKI() string    { return filepath.Join(p.data, "kubelet-pki") }
func (p paths) kubeletConfig() string { return filepath.Join(p.data, "kubelet-config.yaml") }
func (p paths) kubeletClientCert() string {
	return filepath.Join(p.kubeletPKI(), "kubelet-client-current.pem")
}
func (p paths) kubeletServingCert() string {
	return filepath.Join(p.kubeletPKI(), "kubelet-server-current.pem")
}
func (p paths) bootstrapKubeconfig() string { return filepath.Join(p.data, "bootstrap.kubeconfig") }
func (p paths) kubeletKubeconfig() string   { return filepath.Join(p.data, "kubelet.kubeconfig") }
func (p paths) containerdRoot() string      { return filepath.Join(p.data, "containerd") }
func (p paths) containerdState() string     { return filepath.Join(p.run, "containerd") }
func (p paths) containerdLog() string       { return filepath.Join(p.data, "containerd.log") }
func (p paths) cniConfDir() string          { return filepath.Join(p.data, "cni", "net.d") }
func (p paths) cniIPAMDir() string          { return filepath.Join(p.data, "cni", "ipam") }

// loadBalancerState keeps the API servers the cluster published last
// (pkg/agent/loadbalancer).
func (p paths) loadBalancerState() string { return filepath.Join(p.data, "apiservers.json") }
