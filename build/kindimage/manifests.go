package kindimage

import (
	"bytes"
	"embed"
	"text/template"

	"k1m.dev/k1m/manifests"
	"k1m.dev/k1m/pkg/airgap"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/metricsserver"
)

// The files this package writes into the kind images live in files/, as
// they are written; default-cni.yaml and etcd-nofsync.yaml are
// text/template templates, filled in by CNIManifest and NoFsyncEtcdPod.
//
//go:embed files/default-cni.yaml files/etcd-nofsync.yaml
var templates embed.FS

// ContainerdConfig is kind's containerd config (version 2 format, which
// Debian's containerd 1.6 reads) with one difference: restrict_oom_score_adj
// is on. Where the host's root lacks CAP_SYS_RESOURCE (Docker here runs
// kind's nodes through k1m-docker-runc, which drops it), runc in the node
// cannot lower a container's oom_score_adj below containerd's own; with the
// restriction containerd never asks it to. Where the capability is there,
// containerd runs at -999 and the restriction changes nothing.
//
//go:embed files/containerd-config.toml
var ContainerdConfig string

// The no-fsync etcd of a kind control-plane node: Events and Leases, wired
// by kube-apiserver's --etcd-servers-overrides (manifests/kind/cluster.yaml).
// It listens on the node's loopback only and uses kubeadm's etcd server
// certificate, so the apiserver's etcd client certificate (the flags all
// overrides share) is accepted.
const (
	NoFsyncClientURL = "https://[::1]:2479"
	noFsyncPeerURL   = "http://[::1]:2480"
	noFsyncMetrics   = 2481
	noFsyncDataDir   = "/var/lib/etcd-nofsync"
	// EtcdImage is the etcd kubeadm v1.32 runs (constants.DefaultEtcdVersion).
	EtcdImage = "registry.k8s.io/etcd:3.5.16-0"
)

// EtcdOverrides is the kube-apiserver --etcd-servers-overrides value that
// puts Events and Leases on the no-fsync etcd.
func EtcdOverrides() string {
	return constants.EtcdServersOverrides(NoFsyncClientURL)
}

// NoFsyncEtcdPod is the static pod a control-plane node gets once kubeadm
// wrote its own etcd manifest (k1m-etcd-nofsync.path): files/etcd-nofsync.yaml.
func NoFsyncEtcdPod() string {
	return render("etcd-nofsync.yaml", struct {
		Image, DataDir, ClientURL, PeerURL string
		MetricsPort                        int
	}{EtcdImage, noFsyncDataDir, NoFsyncClientURL, noFsyncPeerURL, noFsyncMetrics})
}

// CNIManifest is /kind/manifests/default-cni.yaml: the k1m-cni DaemonSet
// (files/default-cni.yaml). kind applies it after kubeadm init and, seeing
// the marker in its first lines, adds CONTROL_PLANE_ENDPOINT to its
// environment, so k1m-cni reaches the apiserver before kube-proxy serves
// the kubernetes Service.
func CNIManifest(image string) string {
	return render("default-cni.yaml", struct{ Image string }{image})
}

// render fills in files/name. The templates are the package's own and
// their values fixed fields, so a failure is a bug the tests catch.
func render(name string, values any) string {
	tmpl := template.Must(template.New(name).Option("missingkey=error").ParseFS(templates, "files/"+name))
	var b bytes.Buffer
	if err := tmpl.Execute(&b, values); err != nil {
		panic("kindimage: files/" + name + ": " + err.Error())
	}
	return b.String()
}

// LocalStoragePath is where a kind node keeps its local-path volumes
// (kind's own default-storage.yaml's path).
const LocalStoragePath = "/var/local-path-provisioner"

// StorageManifest is /kind/manifests/default-storage.yaml: the
// local-storage component k1m server deploys (manifests/local-storage.yaml,
// the default StorageClass local-path), with kind's volume path. kind
// applies it after kubeadm init, as it applies its own.
func StorageManifest() string {
	data, err := manifests.Component(constants.ComponentLocalStorage, manifests.Values{LocalStoragePath: LocalStoragePath,
		LocalPathProvisionerImage: airgap.LocalPathProvisionerImage, HelperImage: airgap.BusyboxImage})
	if err != nil {
		panic("kindimage: " + err.Error())
	}
	return "# k1m kind node: " + constants.ComponentLocalStorage + "\n" + string(data)
}

// MetricsServerManifest is the metrics-server component k1m server deploys
// (manifests/metrics-server.yaml) at its requests for a small cluster,
// taking the kubelets' serving certificates unchecked: kubeadm's kubelets
// serve self-signed ones, with no CA to check them by. kind applies no
// manifest of its own for it: the node image appends it to
// default-storage.yaml, which kind applies after kubeadm init.
func MetricsServerManifest() string {
	cpu, memory := metricsserver.Requests(0)
	data, err := manifests.Component(constants.ComponentMetricsServer, manifests.Values{MetricsServerImage: airgap.MetricsServerImage,
		MetricsServerCPU: cpu, MetricsServerMemory: memory, KubeletInsecureTLS: true})
	if err != nil {
		panic("kindimage: " + err.Error())
	}
	return "# k1m kind node: " + constants.ComponentMetricsServer + "\n" + string(data)
}

// The systemd units the node image adds to kind's.
var (
	//go:embed files/k1m-preload-images.service
	preloadUnit string
	// kubeadm starts the kubelet; it must find the images there.
	//go:embed files/20-k1m-preload.conf
	kubeletAfterPreload string
	//go:embed files/k1m-etcd-nofsync.path
	etcdNoFsyncPath string
	//go:embed files/k1m-etcd-nofsync.service
	etcdNoFsyncService string
)

// iptablesWrapper stands for iptables, ip6tables and their -save and
// -restore in the kube-proxy image: on first use it picks the backend the
// node uses (the one holding more rules, legacy on a tie, as kind's
// entrypoint decides for the node), links the commands to it and runs the
// call. Upstream's kube-proxy image does the same with iptables-wrapper.
//
//go:embed files/iptables-wrapper.sh
var iptablesWrapper string
