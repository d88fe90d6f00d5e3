package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
)

// DatastoreFile records, in a server's data directory, the external etcd
// its stores are kept in (--datastore-endpoint and the rest): k1m server
// remove and k1m etcd-snapshot, which do not see the server's flags, read
// it. No file: both stores are embedded.
func DatastoreFile(dataDir string) string { return datadir.Server(dataDir).Datastore() }

// DatastoreRecord is DatastoreFile's content.
type DatastoreRecord struct {
	join.Datastore
	TLS etcd.TLS `json:"tls"` // the client TLS of the external etcd
}

// ReadDatastore reads a server's DatastoreFile; none: both stores are
// the server's embedded etcds.
func ReadDatastore(dataDir string) (DatastoreRecord, error) {
	data, err := os.ReadFile(DatastoreFile(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return DatastoreRecord{}, nil
	}
	var r DatastoreRecord
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil {
		return DatastoreRecord{}, fmt.Errorf("reading the server's external datastore record: %w", err)
	}
	return r, nil
}

// datastore is this server's external etcd of each store (none of
// either: embedded).
func (s *Server) datastore() join.Datastore {
	return join.Datastore{Durable: s.cfg.ExternalDurable, NoFsync: s.cfg.ExternalNoFsync, Partitions: s.cfg.ExternalPartitions}
}

// datastoreTLS is what kube-apiserver and k1m present to an external etcd.
func (s *Server) datastoreTLS() etcd.TLS {
	d := s.cfg.Datastore
	return etcd.TLS{CertFile: d.CertFile, KeyFile: d.KeyFile, CAFile: d.CAFile}
}

// recordDatastore writes DatastoreFile, or removes it when both stores
// are embedded.
func (s *Server) recordDatastore() error {
	if !s.cfg.Datastore.External() {
		if err := os.Remove(DatastoreFile(s.cfg.DataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	data, _ := json.MarshalIndent(DatastoreRecord{Datastore: s.datastore(), TLS: s.datastoreTLS()}, "", "  ")
	return fsutil.WriteFile(DatastoreFile(s.cfg.DataDir), append(data, '\n'), 0o600)
}

// datastoreCABundle is the file of the etcd CA and the external etcd's
// CA together: kube-apiserver has one set of etcd TLS flags for all its
// stores, so with one store external it presents the external etcd's
// client certificate to the embedded etcds too, which then trust its CA
// for clients, and it checks both kinds of serving certificates.
func datastoreCABundle(c *certs) string { return filepath.Join(c.dir, "etcd-datastore-ca-bundle.crt") }

func (s *Server) writeDatastoreCABundle(c *certs) error {
	external, err := os.ReadFile(s.cfg.Datastore.CAFile)
	if err != nil {
		return fmt.Errorf("--datastore-cafile: %w", err)
	}
	bundle := append(append([]byte{}, c.etcd.CertPEM...), external...)
	return fsutil.WriteFile(datastoreCABundle(c), bundle, 0o644)
}

// storeTLS is kube-apiserver's client TLS to its stores.
func (s *Server) storeTLS(c *certs) etcd.TLS {
	if !s.cfg.Datastore.External() {
		return etcd.TLS{CertFile: c.etcdClient.cert, KeyFile: c.etcdClient.key, CAFile: c.etcd.cert}
	}
	return etcd.TLS{CertFile: s.cfg.Datastore.CertFile, KeyFile: s.cfg.Datastore.KeyFile, CAFile: datastoreCABundle(c)}
}

// claimDatastore records this cluster's CA in each external store, or
// refuses a store that another cluster's servers write.
func (s *Server) claimDatastore(ctx context.Context, caHash string) error {
	type store struct {
		flag      string // the flag and its value, as given
		endpoints []string
	}
	stores := []store{
		{"--datastore-endpoint " + strings.Join(s.cfg.ExternalDurable, ","), s.cfg.ExternalDurable},
		{"--no-fsync-datastore-endpoint " + strings.Join(s.cfg.ExternalNoFsync, ","), s.cfg.ExternalNoFsync},
	}
	for _, p := range s.externalPartitionStores() {
		stores = append(stores, store{config.PartitionEndpointFlag + " " + p.partition.Name + "=" + strings.Join(p.urls, ","), p.urls})
	}
	for _, store := range stores {
		if len(store.endpoints) == 0 {
			continue
		}
		if err := claimStore(ctx, store.endpoints, s.datastoreTLS(), caHash); err != nil {
			return fmt.Errorf("%s: %w", store.flag, err)
		}
	}
	return nil
}

func claimStore(ctx context.Context, endpoints []string, tls etcd.TLS, caHash string) error {
	cli, err := etcd.NewClient(endpoints, tls)
	if err != nil {
		return err
	}
	defer cli.Close()
	err = etcd.Claim(ctx, cli, caHash)
	if errors.Is(err, etcd.ErrClaimed) {
		return fmt.Errorf("%w: join this server to that cluster (an empty --data-dir, --server and its token), or give this cluster an etcd of its own", err)
	}
	return err
}

// externalPartitionStores are the partitions kept in external etcds
// (--datastore-partition-endpoint), in cfg.Partitions' order; none when
// they are embedded.
func (s *Server) externalPartitionStores() []partitionStore {
	var out []partitionStore
	for _, p := range s.cfg.Partitions {
		if urls := s.cfg.ExternalPartitions[p.Name]; len(urls) > 0 {
			out = append(out, partitionStore{partition: p, urls: urls})
		}
	}
	return out
}

// settleExternalLayout checks --etcd-partitions against the layout an
// external durable store records, and records it on a new cluster, as
// phasePartitions does in an embedded durable etcd: a server whose
// kube-apiserver kept Pods in another store than the others' would serve
// another cluster's Pods.
func (s *Server) settleExternalLayout(ctx context.Context) error {
	cli, err := etcd.NewClient(s.cfg.ExternalDurable, s.datastoreTLS())
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := s.settleLayout(ctx, cli); err != nil {
		return err
	}
	for _, p := range s.externalPartitionStores() {
		s.step("the %s partition in the external etcd at %s", p.partition.Name, strings.Join(p.urls, ","))
	}
	return nil
}

// durableClientTarget is where k1m itself reaches the durable store (its
// records of the no-fsync members live there): the external etcd, or
// this server's durable member.
func (s *Server) durableClientTarget(durable *etcd.Running) ([]string, etcd.TLS) {
	if durable == nil {
		return s.cfg.ExternalDurable, s.datastoreTLS()
	}
	return []string{durable.Member.ClientURL()}, EtcdClientTLS(s.cfg.DataDir)
}
