//go:build !k1m_stock

package flavor

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Name is the flavour's name, as `k1m-build --flavor` spells it.
const Name = "k1m"

// ComponentsInOneProcess: kube-apiserver, the kubelet and kube-proxy run
// as goroutines of the k1m process (patch 0005 shares one signal context
// among them). The controller-manager and scheduler are child processes
// in both flavours (pkg/server phaseControllers).
const ComponentsInOneProcess = true

// SeparateNoFsyncStore: Events and Leases live in a second etcd that does
// not fsync (constants.NoFsyncResources).
const SeparateNoFsyncStore = true

// LocalEtcdSockets: kube-apiserver reaches the server's own etcd members
// over unix sockets without TLS (etcd.Member.LocalSocket).
const LocalEtcdSockets = true

// LeaseDurationFlag: the controller-manager takes --node-lease-duration
// and checks its grace period against it (patch 0003).
const LeaseDurationFlag = true

// DefaultClusterCIDR holds 2^20 node /64s (patch 0008 lets node IPAM cut
// that many).
const DefaultClusterCIDR = "fddf:4035:b500::/44"

// ControllerManagerQPS is kube-controller-manager's --kube-api-qps (its
// --kube-api-burst twice that). client-go's default of 20 makes the CSR
// signer, one status update per certificate, cap joins at 20 a second:
// measured with the joins benchmark, 1,000 simulated joins in 48.5 s
// (20.6/s), each waiting 2.5 s for its certificate (docs/performance.md,
// "The join path").
const ControllerManagerQPS = 200

// SchedulerQPS is kube-scheduler's --kube-api-qps (burst twice that).
// Binding is one request per pod: at client-go's 50 the scheduler bound
// 52 pods a second at 1,000 and at 5,000 nodes in both builds, whatever
// its CPU (bench schedule, 2026-11-25; docs/performance.md, "The
// scheduler").
const SchedulerQPS = 500

// SchedulerPercentageOfNodesToScore is `k1m server
// --scheduler-percentage-of-nodes-to-score`'s default, kube-scheduler's
// percentageOfNodesToScore (0 is upstream's adaptive default). Two
// thirds of the scheduler's CPU is spent per node it filters and scores
// for each pod; upstream's default scores 10% of 5,000 nodes and never
// less than 5% (5,000 of 100,000). At 1% (and never under 100 nodes) the
// scheduler spent 2,880-2,940 CPU-µs a pod at 5,000 nodes against
// 6,745-7,705 adaptive, and spread pods as evenly (bench schedule
// --schedule-scores 0,5,1, 2026-11-26; docs/performance.md, "The
// scheduler"). Below about 210 nodes it makes no difference.
const SchedulerPercentageOfNodesToScore = 1

// MaxNodeMaskBits is node IPAM's limit between cluster CIDR and node mask
// (patch 0008 raised it from 16).
const MaxNodeMaskBits = 20

// SetKubeletRenewInterval sets the kubelet's node Lease renew interval, a
// field patch 0003 adds to the KubeletConfiguration.
func SetKubeletRenewInterval(c *kubeletv1beta1.KubeletConfiguration, d time.Duration) {
	c.NodeLeaseRenewInterval = metav1.Duration{Duration: d}
}
