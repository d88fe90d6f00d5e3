//go:build !k1m_stock

package server

// separateNoFsyncStore: k1m keeps Events and Leases in a second etcd that
// does not fsync (constants.NoFsyncResources).
const separateNoFsyncStore = true

// localEtcdSockets: k1m's kube-apiserver reaches the server's own etcd
// members over unix sockets without TLS (etcd.Member.LocalSocket).
const localEtcdSockets = true
