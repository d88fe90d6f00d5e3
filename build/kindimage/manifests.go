package kindimage

import (
	"fmt"
	"strings"

	"k1m.dev/k1m/pkg/constants"
)

// ContainerdConfig is kind's containerd config (version 2 format, which
// Debian's containerd 1.6 reads) with one difference: restrict_oom_score_adj
// is on. Where the host's root lacks CAP_SYS_RESOURCE (Docker here runs
// kind's nodes through k1m-docker-runc, which drops it), runc in the node
// cannot lower a container's oom_score_adj below containerd's own; with the
// restriction containerd never asks it to. Where the capability is there,
// containerd runs at -999 and the restriction changes nothing.
const ContainerdConfig = `# k1m kind node: kind's containerd settings (images/base/files/etc/containerd/config.toml)
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  tolerate_missing_hugepages_controller = true
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  discard_unpacked_layers = true
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "/etc/containerd/cri-base.json"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true

# the RuntimeClass specs' handler name, same settings as runc
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "/etc/containerd/cri-base.json"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler.options]
    SystemdCgroup = true
`

// The no-fsync etcd of a kind control-plane node: Events and Leases, wired
// by kube-apiserver's --etcd-servers-overrides (manifests/kind-config.yaml).
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
// wrote its own etcd manifest (k1m-etcd-nofsync.path).
func NoFsyncEtcdPod() string {
	return fmt.Sprintf(`# k1m: the no-fsync etcd holding Events and Leases (kube-apiserver --etcd-servers-overrides)
apiVersion: v1
kind: Pod
metadata:
  name: etcd-nofsync
  namespace: kube-system
  labels: {component: etcd-nofsync, tier: control-plane}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: etcd
    image: %[1]s
    command:
    - etcd
    - --name=nofsync
    - --data-dir=%[2]s
    - --unsafe-no-fsync=true
    - --listen-client-urls=%[3]s
    - --advertise-client-urls=%[3]s
    - --listen-peer-urls=%[4]s
    - --initial-advertise-peer-urls=%[4]s
    - --initial-cluster=nofsync=%[4]s
    - --listen-metrics-urls=http://[::1]:%[5]d
    - --client-cert-auth=true
    - --cert-file=/etc/kubernetes/pki/etcd/server.crt
    - --key-file=/etc/kubernetes/pki/etcd/server.key
    - --trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt
    - --snapshot-count=10000
    livenessProbe:
      httpGet: {host: "::1", path: "/health?exclude=NOSPACE&serializable=true", port: %[5]d, scheme: HTTP}
      initialDelaySeconds: 10
      periodSeconds: 10
      failureThreshold: 8
    resources:
      requests: {cpu: 50m, memory: 50Mi}
    volumeMounts:
    - {name: data, mountPath: %[2]s}
    - {name: certs, mountPath: /etc/kubernetes/pki/etcd, readOnly: true}
  volumes:
  - {name: data, hostPath: {path: %[2]s, type: DirectoryOrCreate}}
  - {name: certs, hostPath: {path: /etc/kubernetes/pki/etcd, type: Directory}}
`, EtcdImage, noFsyncDataDir, NoFsyncClientURL, noFsyncPeerURL, noFsyncMetrics)
}

// CNIManifest is /kind/manifests/default-cni.yaml: the k1m-cni DaemonSet.
// kind applies it after kubeadm init and, seeing the marker below, adds
// CONTROL_PLANE_ENDPOINT to its environment, so k1m-cni reaches the
// apiserver before kube-proxy serves the kubernetes Service.
func CNIManifest(image string) string {
	return strings.ReplaceAll(`# k1m-cni: each node's CNI config (bridge + host-local on its IPv6 pod
# range) and routes to the other nodes' pod ranges. kind: would you kindly patch this file
apiVersion: v1
kind: ServiceAccount
metadata: {name: k1m-cni, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: k1m-cni}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: k1m-cni}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: k1m-cni}
subjects:
- {kind: ServiceAccount, name: k1m-cni, namespace: kube-system}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: k1m-cni
  namespace: kube-system
  labels: {app: k1m-cni}
spec:
  selector: {matchLabels: {app: k1m-cni}}
  template:
    metadata: {labels: {app: k1m-cni}}
    spec:
      hostNetwork: true
      serviceAccountName: k1m-cni
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      containers:
      - name: k1m-cni
        image: IMAGE
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        securityContext: {privileged: true}
        resources:
          requests: {cpu: 10m, memory: 20Mi}
        volumeMounts:
        - {name: cni-conf, mountPath: /etc/cni/net.d}
        - {name: cni-ipam, mountPath: /var/lib/cni/k1m}
      volumes:
      - {name: cni-conf, hostPath: {path: /etc/cni/net.d, type: DirectoryOrCreate}}
      - {name: cni-ipam, hostPath: {path: /var/lib/cni/k1m, type: DirectoryOrCreate}}
`, "IMAGE", image)
}

// StorageManifest is /kind/manifests/default-storage.yaml: kind's legacy
// default StorageClass (host-path, no provisioner pod, so no image to
// pull); kind's local-path-provisioner image is not built here.
const StorageManifest = `# k1m kind node: kind's legacy default storage class
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
`

// The systemd units the node image adds to kind's.
const (
	preloadUnit = `[Unit]
Description=k1m: import the preloaded images (/kind/images) into containerd
After=containerd.service
Requires=containerd.service
Before=kubelet.service
ConditionPathExists=!/var/lib/k1m/images-imported

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec 'for f in /kind/images/*.tar; do ctr --namespace=k8s.io images import --no-unpack "$f"; done; mkdir -p /var/lib/k1m; touch /var/lib/k1m/images-imported'

[Install]
WantedBy=multi-user.target
`
	// kubeadm starts the kubelet; it must find the images there.
	kubeletAfterPreload = `[Unit]
After=k1m-preload-images.service
Wants=k1m-preload-images.service
`
	etcdNoFsyncPath = `[Unit]
Description=k1m: start the no-fsync etcd once kubeadm made this node a control plane

[Path]
PathExists=/etc/kubernetes/manifests/etcd.yaml

[Install]
WantedBy=multi-user.target
`
	etcdNoFsyncService = `[Unit]
Description=k1m: the no-fsync etcd static pod (Events and Leases)

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/cp /kind/k1m/etcd-nofsync.yaml /etc/kubernetes/manifests/etcd-nofsync.yaml
`
)

// iptablesWrapper stands for iptables, ip6tables and their -save and
// -restore in the kube-proxy image: on first use it picks the backend the
// node uses (the one holding more rules, legacy on a tie, as kind's
// entrypoint decides for the node), links the commands to it and runs the
// call. Upstream's kube-proxy image does the same with iptables-wrapper.
const iptablesWrapper = `#!/bin/busybox sh
# k1m kube-proxy image: pick the node's iptables backend, then run the call.
set -e
bb=/bin/busybox
legacy=$( (iptables-legacy-save; ip6tables-legacy-save) 2>/dev/null | $bb grep -c '^-' || true)
nft=$( (iptables-nft-save; ip6tables-nft-save) 2>/dev/null | $bb grep -c '^-' || true)
mode=nft
[ "${legacy:-0}" -ge "${nft:-0}" ] && mode=legacy
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  $bb ln -sf "xtables-$mode-multi" "/usr/sbin/$cmd"
done
exec "$0" "$@"
`
