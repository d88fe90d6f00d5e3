// Package flavor is the one place that names what differs between the two
// builds of k1m's own code: the k1m flavour, compiled against the patched
// Kubernetes tree, and the stock flavour (build tag k1m_stock), compiled
// against unpatched v1.32.5 so that `make cluster FLAVOR=stock` and the
// benchmarks start stock Kubernetes the way the k1m build starts its own,
// in the shape kubeadm gives it. Every difference is a constant or a
// function here (flavor_k1m.go, flavor_stock.go); the rest of the code
// reads them and compiles in both flavours. `make verify` vets both.
// In both, kube-controller-manager and kube-scheduler are supervised child
// processes (multicall.Supervise): they exit when they lose their leader
// election, and the server starts them again.
//
//	what                      k1m                       stock
//	Name                      "k1m"                     "stock"
//	ComponentsInOneProcess    kube-apiserver and the    no: child processes
//	                          kubelet (patch 0005)
//	SeparateNoFsyncStore      yes: Events, Leases in    no: one etcd with fsync
//	                          the no-fsync etcd         for every resource
//	LocalEtcdSockets          yes: unix sockets         no: TLS on loopback
//	LeaseDurationFlag         yes (patch 0003)          no
//	SetKubeletRenewInterval   sets the field (0003)     does nothing
//	DefaultClusterCIDR        a /44: 2^20 node /64s     a /48: 2^16
//	MaxNodeMaskBits           20 (patch 0008)           16
package flavor

// Tag is the build tag of the stock flavour.
const Tag = "k1m_stock"
