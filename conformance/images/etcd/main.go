// Command etcd is etcd v3.5.16 (the version Kubernetes 1.32 pins) built
// from its server module, for the test image the aggregator conformance
// spec runs beside the sample-apiserver (upstream: registry.k8s.io/etcd).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
