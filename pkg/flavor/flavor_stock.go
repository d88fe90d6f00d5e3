//go:build k1m_stock

package flavor

import (
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Name is the flavour's name, as `k1m-build --flavor` spells it.
const Name = "stock"

// ComponentsInOneProcess: each component runs as a child process of the
// k1m binary; without patch 0005 a second component in one process panics
// setting up its signal context.
const ComponentsInOneProcess = false

// SeparateNoFsyncStore: one etcd with fsync holds every resource, as
// kubeadm deploys it, so that the benchmark compares k1m with what users
// run.
const SeparateNoFsyncStore = false

// LocalEtcdSockets: kube-apiserver reaches its etcd over TLS on loopback,
// as kubeadm's does.
const LocalEtcdSockets = false

// LeaseDurationFlag: the unpatched controller-manager has no
// --node-lease-duration; its grace period still follows the lease profile.
const LeaseDurationFlag = false

// DefaultClusterCIDR: the unpatched node IPAM refuses a cluster CIDR more
// than 16 bits wider than the /64 node ranges.
const DefaultClusterCIDR = "fddf:4035:b500::/48"

// ControllerManagerQPS: 0 leaves kube-controller-manager at client-go's
// default (20 requests a second), as kubeadm does.
const ControllerManagerQPS = 0

// SchedulerQPS: 0 leaves kube-scheduler at client-go's default (50).
const SchedulerQPS = 0

// SchedulerPercentageOfNodesToScore: 0 leaves kube-scheduler's adaptive
// default, as kubeadm does.
const SchedulerPercentageOfNodesToScore = 0

// MaxNodeMaskBits is upstream node IPAM's limit between cluster CIDR and
// node mask.
const MaxNodeMaskBits = 16

// SetKubeletRenewInterval does nothing: the unpatched kubelet renews every
// quarter of its lease duration and has no such field.
func SetKubeletRenewInterval(*kubeletv1beta1.KubeletConfiguration, time.Duration) {}
