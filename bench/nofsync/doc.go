// Package nofsync holds TestMeasureNoFsyncPlacement, the measurement
// behind the no-fsync etcd's placement (docs/operations.md): its data
// directory on disk, wiped at every start, or on a tmpfs. It is a test
// that never runs by default; the product (pkg/etcd) only provides the
// member it starts.
package nofsync
