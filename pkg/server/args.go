package server

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/schedulerconfig"
)

// etcdStores are the client URLs kube-apiserver reaches both stores at:
// the server's own members over loopback, or on an API-server-only server
// (--disable-etcd) every member of the cluster's.
type etcdStores struct {
	durable, noFsync []string
	// partitions are the store's partitions (--etcd-partitions).
	partitions []partitionStore
	// tls is kube-apiserver's client TLS to both (one set for all stores);
	// none over the local sockets of the server's own members.
	tls etcd.TLS
}

// etcdOverrides is kube-apiserver's --etcd-servers-overrides value: the
// no-fsync resources on the no-fsync etcd (constants.NoFsyncResources),
// then each partitioned resource on its partition's members.
func etcdOverrides(stores etcdStores) string {
	parts := []string{constants.EtcdServersOverrides(stores.noFsync...)}
	for _, p := range stores.partitions {
		parts = append(parts, p.partition.Override(p.urls...))
	}
	return strings.Join(parts, ",")
}

func apiserverArgs(cfg config.Server, advertise string, c *certs, stores etcdStores, opts apiserverOptions) []string {
	domain := strings.TrimSuffix(cfg.ClusterDomain, ".")
	tls := stores.tls
	args := []string{
		"--advertise-address=" + advertise,
		"--bind-address=" + cfg.BindAddress,
		"--secure-port=" + strconv.Itoa(cfg.HTTPSPort),
		"--etcd-servers=" + strings.Join(stores.durable, ","),
	}
	if len(stores.noFsync) > 0 { // none in the stock build: one store
		args = append(args, "--etcd-servers-overrides="+etcdOverrides(stores))
	}
	if tls != (etcd.TLS{}) {
		args = append(args, "--etcd-cafile="+tls.CAFile, "--etcd-certfile="+tls.CertFile, "--etcd-keyfile="+tls.KeyFile)
	}
	args = append(args,
		"--client-ca-file="+c.cluster.cert,
		"--tls-cert-file="+c.apiserver.cert,
		"--tls-private-key-file="+c.apiserver.key,
		"--kubelet-client-certificate="+c.kubeletClient.cert,
		"--kubelet-client-key="+c.kubeletClient.key,
		"--kubelet-certificate-authority="+c.kubeletServing.cert,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--requestheader-client-ca-file="+c.frontProxy.cert,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+c.frontProxyClient.cert,
		"--proxy-client-key-file="+c.frontProxyClient.key,
		"--service-account-issuer=https://kubernetes.default.svc."+domain,
		"--service-account-key-file="+c.saPub,
		"--service-account-signing-key-file="+c.saKey,
		"--service-cluster-ip-range="+cfg.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins="+componentargs.NodeRestriction,
		"--enable-bootstrap-token-auth=true",
		"--allow-privileged=true",
		"--profiling=false",
		// On SIGTERM, keep listening until the requests in flight are
		// done (new ones get 429 with Retry-After), then close watches
		// within 2 s: a stop drains in seconds, not the 60 s the HTTP
		// server would otherwise wait for watch streams.
		"--shutdown-send-retry-after=true",
		// Keep serving for 3 s after SIGTERM: the controller-manager,
		// scheduler and kubelet in this process stop on the same signal,
		// and a controller still fetching a token from a closed listener
		// exits the whole process (klog.Fatal), making a clean stop look
		// like a failure.
		"--shutdown-delay-duration=3s",
	)
	if opts.encryptionConfig != "" {
		args = append(args, "--encryption-provider-config="+opts.encryptionConfig)
	}
	if a := opts.audit; a.LogPath != "" {
		args = append(args, "--audit-policy-file="+a.PolicyFile, "--audit-log-path="+a.LogPath,
			"--audit-log-maxage="+strconv.Itoa(a.MaxAge), "--audit-log-maxbackup="+strconv.Itoa(a.MaxBackup), "--audit-log-maxsize="+strconv.Itoa(a.MaxSize))
	}
	return componentargs.Merge(args, opts.extra)
}

// localServingArgs are shared by the controller-manager and the
// scheduler: their kubeconfig to check who calls them, serving on
// loopback only, and leader election only when there are several servers
// (a lone server's would renew a Lease every 2 s for nothing).
func localServingArgs(kubeconfig string, leaderElect bool) []string {
	return []string{
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=::1",
		"--leader-elect=" + strconv.FormatBool(leaderElect),
	}
}

// localControllerArgs are the controller-manager's: one kubeconfig for
// everything, no profiling.
func localControllerArgs(kubeconfig string, leaderElect bool) []string {
	args := append([]string{"--kubeconfig=" + kubeconfig}, localServingArgs(kubeconfig, leaderElect)...)
	return append(args, "--profiling=false")
}

func controllerManagerArgs(cfg config.Server, lease config.LeaseProfile, kubeconfig string, c *certs, leaderElect bool) []string {
	return append(append(localControllerArgs(kubeconfig, leaderElect),
		"--allocate-node-cidrs=true",
		"--cluster-cidr="+cfg.ClusterCIDR,
		"--node-cidr-mask-size-ipv6="+strconv.Itoa(config.DefaultNodeMask),
		"--service-cluster-ip-range="+cfg.ServiceCIDR,
		// One signer each, not --cluster-signing-cert-file for all: kubelet
		// serving certificates come from their own CA (certs.kubeletServing).
		// The legacy-unknown signer stays off (certificates/v1 refuses it).
		"--cluster-signing-kubelet-serving-cert-file="+c.kubeletServing.cert,
		"--cluster-signing-kubelet-serving-key-file="+c.kubeletServing.key,
		"--cluster-signing-kubelet-client-cert-file="+c.cluster.cert,
		"--cluster-signing-kubelet-client-key-file="+c.cluster.key,
		"--cluster-signing-kube-apiserver-client-cert-file="+c.cluster.cert,
		"--cluster-signing-kube-apiserver-client-key-file="+c.cluster.key,
		"--root-ca-file="+c.cluster.cert,
		"--service-account-private-key-file="+c.saKey,
		"--use-service-account-credentials=true",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--node-monitor-grace-period="+lease.GracePeriod.String(),
	), append(leaseDurationArgs(lease), clientRateArgs(flavor.ControllerManagerQPS)...)...)
}

// clientRateArgs set a component's client rate limit, qps a second and
// a burst of twice that; none for 0 (client-go's default).
func clientRateArgs(qps int) []string {
	if qps == 0 {
		return nil
	}
	return []string{"--kube-api-qps=" + strconv.Itoa(qps), "--kube-api-burst=" + strconv.Itoa(2*qps)}
}

// schedulerArgs are kube-scheduler's flags beside its configuration file
// (pkg/schedulerconfig), which holds its kubeconfig, client rate and
// profiling: with a file, kube-scheduler ignores those flags.
func schedulerArgs(configFile, kubeconfig string, leaderElect bool) []string {
	return append([]string{"--config=" + configFile}, localServingArgs(kubeconfig, leaderElect)...)
}

// schedulerSettings are what k1m decides in kube-scheduler's file.
func schedulerSettings(cfg config.Server, kubeconfig string) schedulerconfig.Settings {
	return schedulerconfig.Settings{Kubeconfig: kubeconfig, QPS: flavor.SchedulerQPS, PercentageOfNodesToScore: cfg.SchedulerPercentageOfNodesToScore}
}

// apiURL is the https URL of kube-apiserver at host.
func apiURL(host string, port int) string {
	return fmt.Sprintf("https://%s", net.JoinHostPort(host, strconv.Itoa(port)))
}

// leaseDurationArgs tell the controller-manager the nodes' lease duration,
// which patch 0003 checks its grace period against (none in the stock
// flavour, whose controller-manager has no such flag: its grace period
// still follows the lease profile).
func leaseDurationArgs(lease config.LeaseProfile) []string {
	if !flavor.LeaseDurationFlag {
		return nil
	}
	return []string{"--node-lease-duration=" + lease.LeaseDuration.String()}
}
