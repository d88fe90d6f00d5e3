package agent

import (
	"context"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"k1m.dev/k1m/pkg/cgroups"
	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/multicall"
)

// startKubelet starts the kubelet in this process, in the node's own
// cgroup, with a KubeletConfiguration written at every start.
func (n *node) startKubelet(ctx context.Context) error {
	cfg, p := n.cfg, n.cfg.Paths
	if err := cgroups.Ensure(cfg.CgroupRoot); err != nil {
		return err
	}
	kc := kubeletConfig(p, n.settings, cfg.CgroupRoot, n.ctrd.Endpoint(), cfg.PodLogsDir, cfg.KubeReservedMemory)
	kc.RegisterWithTaints = cfg.Taints // --node-taint, at registration
	if err := writeKubeletConfig(p.KubeletConfig, kc); err != nil {
		return err
	}
	n.say("starting the kubelet (renews its Lease every %s, lease %ds)", n.settings.RenewInterval, n.settings.LeaseDurationSeconds)
	n.componentsCtx, n.stopComponents = context.WithCancel(ctx)
	n.onStop(n.stopComponents)
	args := append(kubeletArgs(p, cfg.NodeName, cfg.NodeIP, n.bootstrapping), nodeLabelsArg(cfg.Labels)...)
	n.kubelet = multicall.Start(n.componentsCtx, componentargs.Kubelet.Name, componentargs.Merge(args, cfg.PassThrough[componentargs.Kubelet.Name]))
	return nil
}

// startKubeProxy starts kube-proxy in this process, beside the kubelet.
func (n *node) startKubeProxy(context.Context) error {
	cfg := n.cfg
	n.say("starting kube-proxy (%s mode)", cfg.ProxyMode)
	args := proxyArgs(cfg.Paths, cfg.NodeName, cfg.ProxyMode, n.settings.ClusterCIDR)
	n.proxy = multicall.Start(n.componentsCtx, componentargs.KubeProxy.Name, componentargs.Merge(args, cfg.PassThrough[componentargs.KubeProxy.Name]))
	return nil
}

// kubeletConfig is the KubeletConfiguration: the lease timings and
// cluster DNS come from the server (join.Settings), so every node agrees.
func kubeletConfig(p config.AgentPaths, s join.Settings, cgroupRoot, endpoint, podLogsDir string, kubeReservedMemory int64) *kubeletv1beta1.KubeletConfiguration {
	c := &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		Address:                  "::",
		HealthzBindAddress:       "::1",
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               cgroupRoot,
		ContainerRuntimeEndpoint: endpoint,
		PodLogsDir:               podLogsDir,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: p.CAFile},
		},
		Authorization:            kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		ClusterDNS:               []string{s.ClusterDNS},
		ClusterDomain:            strings.TrimSuffix(s.ClusterDomain, "."),
		NodeLeaseDurationSeconds: s.LeaseDurationSeconds,
		RotateCertificates:       true,
		// Serving certificate from the kubelet serving CA, through a CSR
		// that k1m's approver grants for the node's own addresses:
		// kube-apiserver verifies kubelets.
		ServerTLSBootstrap:          true,
		FailSwapOn:                  ptr.To(false),
		SerializeImagePulls:         ptr.To(false),
		ImageGCHighThresholdPercent: ptr.To[int32](constants.ImageGCHighThresholdPercent),
		ImageGCLowThresholdPercent:  ptr.To[int32](constants.ImageGCLowThresholdPercent),
		EvictionHard: map[string]string{
			"memory.available":  constants.EvictionMemoryAvailable,
			"nodefs.available":  constants.EvictionDiskFree,
			"imagefs.available": constants.EvictionDiskFree,
			"nodefs.inodesFree": constants.EvictionDiskFree,
		},
	}
	if kubeReservedMemory > 0 {
		c.KubeReserved = map[string]string{"memory": strconv.FormatInt(kubeReservedMemory, 10)}
	}
	flavor.SetKubeletRenewInterval(c, s.RenewInterval)
	return c
}

// writeKubeletConfig writes c as YAML, rewritten at every start.
func writeKubeletConfig(path string, c *kubeletv1beta1.KubeletConfiguration) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return fsutil.WriteFile(path, append([]byte("# Written by k1m agent at every start.\n"), data...), 0o600)
}

// kubeletArgs are the kubelet's flags; --bootstrap-kubeconfig only while
// the node joins (a restart runs on the node's own certificate).
func kubeletArgs(p config.AgentPaths, nodeName, nodeIP string, bootstrapping bool) []string {
	args := []string{
		"--config=" + p.KubeletConfig,
		"--kubeconfig=" + p.KubeletKubeconfig,
		"--cert-dir=" + p.KubeletPKI,
		"--root-dir=" + p.KubeletRoot,
		"--hostname-override=" + nodeName,
		"--node-ip=" + nodeIP,
	}
	if bootstrapping {
		args = append(args, "--bootstrap-kubeconfig="+p.BootstrapKubeconfig)
	}
	return args
}

// nodeLabelsArg is the kubelet's --node-labels for --node-label's
// labels, sorted by key; none without labels. The kubelet sets them when
// it registers the Node.
func nodeLabelsArg(labels map[string]string) []string {
	if len(labels) == 0 {
		return nil
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return []string{"--node-labels=" + strings.Join(pairs, ",")}
}

func proxyArgs(p config.AgentPaths, nodeName, mode, clusterCIDR string) []string {
	return []string{
		"--kubeconfig=" + p.KubeletKubeconfig,
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
		"--healthz-bind-address=" + net.JoinHostPort("::1", strconv.Itoa(constants.KubeProxyHealthzPort)),
		"--metrics-bind-address=" + net.JoinHostPort("::1", strconv.Itoa(constants.KubeProxyMetricsPort)),
	}
}
