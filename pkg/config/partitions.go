package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/flavor"
)

// The flags of the store's partitions (constants.StorePartitions).
const (
	EtcdPartitionsFlag          = "--etcd-partitions"
	EtcdPartitionQuotaBytesFlag = "--etcd-partition-quota-backend-bytes"
)

// requirePartitions checks --etcd-partitions: known names, each once, in
// the k1m build, with the durable store embedded (an external etcd per
// partition is not offered).
func (s *Server) requirePartitions() error {
	if len(s.EtcdPartitions) == 0 {
		if s.EtcdPartitionQuotaBytes != 0 {
			return fmt.Errorf("%s %d: the store has no partitions (%s)", EtcdPartitionQuotaBytesFlag, s.EtcdPartitionQuotaBytes, EtcdPartitionsFlag)
		}
		return nil
	}
	var errs []error
	seen := map[string]bool{}
	for _, name := range s.EtcdPartitions {
		if _, ok := constants.StorePartitionNamed(name); !ok {
			errs = append(errs, fmt.Errorf("%s: %q is not a resource k1m partitions: want some of %s, comma separated, e.g. pods,nodes",
				EtcdPartitionsFlag, name, strings.Join(constants.StorePartitionNames(), ", ")))
			continue
		}
		if seen[name] {
			errs = append(errs, fmt.Errorf("%s: %q is given twice", EtcdPartitionsFlag, name))
		}
		seen[name] = true
	}
	if !flavor.SeparateNoFsyncStore {
		errs = append(errs, fmt.Errorf("%s: the stock build keeps every resource in one etcd", EtcdPartitionsFlag))
	}
	if s.Datastore.Endpoint != "" {
		errs = append(errs, fmt.Errorf("%s with --datastore-endpoint: partitions are embedded etcd groups beside an embedded durable etcd; an external durable store keeps every resource but Events and Leases", EtcdPartitionsFlag))
	}
	if q := s.EtcdPartitionQuotaBytes; q != 0 && (q < MinEtcdQuotaBytes || q > MaxEtcdQuotaBytes) {
		errs = append(errs, fmt.Errorf("%s %d: want from %d (16 MiB) to %d (64 GiB), or 0 for --etcd-quota-backend-bytes", EtcdPartitionQuotaBytesFlag, q, MinEtcdQuotaBytes, MaxEtcdQuotaBytes))
	}
	return errors.Join(errs...)
}

// partitions are the partitions --etcd-partitions names, in
// constants.StorePartitions' order whatever the flag's: the order every
// server starts and records them in.
func (s *Server) partitions() []constants.StorePartition {
	var out []constants.StorePartition
	for _, p := range constants.StorePartitions {
		if slices.Contains(s.EtcdPartitions, p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// partitionPorts are the client and peer ports of every partition's
// member, named for requireDistinctPorts.
func (s *Server) partitionPorts() []portUse {
	var out []portUse
	for _, p := range s.partitions() {
		port := s.EtcdPort + p.PortOffset
		out = append(out,
			portUse{fmt.Sprintf("the %s partition's etcd (--etcd-port+%d)", p.Name, p.PortOffset), port},
			portUse{fmt.Sprintf("the %s partition's etcd (peer, --etcd-port+%d)", p.Name, p.PortOffset+1), port + 1})
	}
	return out
}
