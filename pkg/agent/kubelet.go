package agent

import (
	"fmt"
	"strings"

	"k1m.dev/k1m/pkg/join"
)

// kubeletConfig renders the KubeletConfiguration: the lease timings and
// cluster DNS come from the server (join.Settings), so every node agrees.
func kubeletConfig(p paths, s join.Settings, cgroupRoot, endpoint, podLogsDir string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Written by k1m agent at every start.
address: "::"
healthzBindAddress: "::1"
cgroupDriver: cgroupfs
cgroupRoot: %q
containerRuntimeEndpoint: %q
podLogsDir: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
clusterDNS: [%q]
clusterDomain: %q
nodeLeaseDurationSeconds: %d
nodeLeaseRenewInterval: %s
rotateCertificates: true
# Serving certificate from the cluster CA, through a CSR that k1m's approver
# grants for the node's own addresses: kube-apiserver verifies kubelets.
serverTLSBootstrap: true
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
`, cgroupRoot, endpoint, podLogsDir, p.caFile(), s.ClusterDNS, strings.TrimSuffix(s.ClusterDomain, "."), s.LeaseDurationSeconds, s.RenewInterval)
}

// kubeletArgs are the kubelet's flags; --bootstrap-kubeconfig only while
// the node joins (a restart runs on the node's own certificate).
func kubeletArgs(p paths, nodeName, nodeIP string, bootstrapping bool) []string {
	args := []string{
		"--config=" + p.kubeletConfig(),
		"--kubeconfig=" + p.kubeletKubeconfig(),
		"--cert-dir=" + p.kubeletPKI(),
		"--root-dir=" + p.kubeletRoot(),
		"--hostname-override=" + nodeName,
		"--node-ip=" + nodeIP,
	}
	if bootstrapping {
		args = append(args, "--bootstrap-kubeconfig="+p.bootstrapKubeconfig())
	}
	return args
}

func proxyArgs(p paths, nodeName, mode, clusterCIDR string) []string {
	return []string{
		"--kubeconfig=" + p.kubeletKubeconfig(),
		"--hostname-override=" + nodeName,
		"--proxy-mode=" + mode,
		"--cluster-cidr=" + clusterCIDR,
		// The conntrack table is the machine's: leave its sysctls alone
		// (several nodes may share one kernel).
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		// Loopback only: nothing but kube-apiserver and the kubelet
		// listens beyond it (docs/security.md).
		"--healthz-bind-address=[::1]:10256",
		"--metrics-bind-address=[::1]:10249",
	}
}
