package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
	return join.Datastore{Durable: s.cfg.ExternalDurable, NoFsync: s.cfg.ExternalNoFsync}
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
	for _, store := range []struct {
		flag      string
		endpoints []string
	}{
		{"--datastore-endpoint", s.cfg.ExternalDurable},
		{"--no-fsync-datastore-endpoint", s.cfg.ExternalNoFsync},
	} {
		if len(store.endpoints) == 0 {
			continue
		}
		if err := claimStore(ctx, store.endpoints, s.datastoreTLS(), caHash); err != nil {
			return fmt.Errorf("%s %s: %w", store.flag, strings.Join(store.endpoints, ","), err)
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

// durableClientTarget is where k1m itself reaches the durable store (its
// records of the no-fsync members live there): the external etcd, or
// this server's durable member.
func (s *Server) durableClientTarget(durable *etcd.Running) ([]string, etcd.TLS) {
	if durable == nil {
		return s.cfg.ExternalDurable, s.datastoreTLS()
	}
	return []string{durable.Member.ClientURL()}, EtcdClientTLS(s.cfg.DataDir)
}
