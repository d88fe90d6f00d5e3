//go:build !k1m_stock

package server

// separateNoFsyncStore: k1m keeps Events and Leases in a second etcd that
// does not fsync (constants.EphemeralResources).
const separateNoFsyncStore = true
