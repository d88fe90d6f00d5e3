package config

import (
	"errors"
	"fmt"
	"maps"
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
// the k1m build; beside an external durable store, each partition in an
// external etcd of its own (--datastore-partition-endpoint).
func (s *Server) requirePartitions() error {
	external, err := ParsePartitionEndpoints(s.Datastore.PartitionEndpoints)
	if err != nil {
		return err
	}
	if len(s.EtcdPartitions) == 0 {
		var errs []error
		if s.EtcdPartitionQuotaBytes != 0 {
			errs = append(errs, fmt.Errorf("%s %d: the store has no partitions (%s)", EtcdPartitionQuotaBytesFlag, s.EtcdPartitionQuotaBytes, EtcdPartitionsFlag))
		}
		return errors.Join(append(errs, s.requirePartitionEndpoints(external)...)...)
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
	errs = append(errs, s.requirePartitionEndpoints(external)...)
	q := s.EtcdPartitionQuotaBytes
	switch {
	case q != 0 && s.Datastore.Endpoint != "":
		errs = append(errs, fmt.Errorf("%s %d with --datastore-endpoint: each partition is an external etcd (%s), whose quota is its own (its --quota-backend-bytes)", EtcdPartitionQuotaBytesFlag, q, PartitionEndpointFlag))
	case q != 0 && (q < MinEtcdQuotaBytes || q > MaxEtcdQuotaBytes):
		errs = append(errs, fmt.Errorf("%s %d: want from %d (16 MiB) to %d (64 GiB), or 0 for --etcd-quota-backend-bytes", EtcdPartitionQuotaBytesFlag, q, MinEtcdQuotaBytes, MaxEtcdQuotaBytes))
	}
	return errors.Join(errs...)
}

// PartitionEndpointFlag names a partition's external etcd.
const PartitionEndpointFlag = "--datastore-partition-endpoint"

// ParsePartitionEndpoints reads --datastore-partition-endpoint's values,
// each NAME=URL,URL, into each partition's member URLs by name.
func ParsePartitionEndpoints(values []string) (map[string][]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	var errs []error
	for _, v := range values {
		name, urls, ok := strings.Cut(v, "=")
		switch _, known := constants.StorePartitionNamed(name); {
		case !ok || name == "" || urls == "":
			errs = append(errs, fmt.Errorf("%s %q: want NAME=URL,URL, a partition and its etcd members' https URLs, e.g. pods=https://[fddf:4035:b520::7]:2379", PartitionEndpointFlag, v))
		case !known:
			errs = append(errs, fmt.Errorf("%s %q: %q is not a resource k1m partitions: want one of %s", PartitionEndpointFlag, v, name, strings.Join(constants.StorePartitionNames(), ", ")))
		case out[name] != nil:
			errs = append(errs, fmt.Errorf("%s %q: the %s partition is given twice", PartitionEndpointFlag, v, name))
		default:
			if err := checkEndpoints(urls); err != nil {
				errs = append(errs, fmt.Errorf("%s %q: %w", PartitionEndpointFlag, v, err))
				continue
			}
			out[name] = Endpoints(urls)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// requirePartitionEndpoints wants, beside an external durable store, an
// external etcd for exactly the partitions --etcd-partitions names; with
// an embedded one, none (k1m runs every partition's members).
func (s *Server) requirePartitionEndpoints(external map[string][]string) []error {
	var errs []error
	if s.Datastore.Endpoint == "" {
		for _, name := range slices.Sorted(maps.Keys(external)) {
			errs = append(errs, fmt.Errorf("%s %s=...: without --datastore-endpoint the durable etcd is embedded and so is every partition (%s); an external etcd per partition goes with an external durable store", PartitionEndpointFlag, name, EtcdPartitionsFlag))
		}
		return errs
	}
	for _, p := range s.partitions() {
		if external[p.Name] == nil {
			errs = append(errs, fmt.Errorf("%s %s with --datastore-endpoint: the durable store is external, and so is each partition: give %s %s=https://HOST:PORT[,...], its etcd's members", EtcdPartitionsFlag, p.Name, PartitionEndpointFlag, p.Name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(external)) {
		if !slices.Contains(s.EtcdPartitions, name) {
			errs = append(errs, fmt.Errorf("%s %s=...: %s does not name %s: add it there (the same on every server) or drop this flag", PartitionEndpointFlag, name, EtcdPartitionsFlag, name))
		}
	}
	return errs
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
// member, named for requireDistinctPorts (none when the partitions are
// external etcds).
func (s *Server) partitionPorts() []portUse {
	if s.Datastore.Endpoint != "" {
		return nil // each partition an external etcd: no member here
	}
	var out []portUse
	for _, p := range s.partitions() {
		port := s.EtcdPort + p.PortOffset
		out = append(out,
			portUse{fmt.Sprintf("the %s partition's etcd (--etcd-port+%d)", p.Name, p.PortOffset), port},
			portUse{fmt.Sprintf("the %s partition's etcd (peer, --etcd-port+%d)", p.Name, p.PortOffset+1), port + 1})
	}
	return out
}
