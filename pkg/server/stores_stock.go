//go:build k1m_stock

package server

// separateNoFsyncStore: the stock build is Kubernetes as kubeadm deploys
// it, one etcd with fsync holding every resource, so that what the
// benchmark compares k1m with is what users run (docs/performance.md).
const separateNoFsyncStore = false

// localEtcdSockets: kubeadm's kube-apiserver reaches its etcd over TLS on
// loopback, and so does the stock build's.
const localEtcdSockets = false
