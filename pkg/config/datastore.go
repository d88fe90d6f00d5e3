package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Datastore is an external etcd cluster the operator keeps, for either
// store: the durable one (--datastore-endpoint) and the no-fsync one that
// holds Events and Leases (--no-fsync-datastore-endpoint). One set of TLS
// files reaches both: kube-apiserver has one set of etcd TLS flags for all
// its stores.
type Datastore struct {
	Endpoint        string // comma-separated https URLs of the durable store's members
	NoFsyncEndpoint string // the same for the no-fsync store
	// PartitionEndpoints are the store partitions' external etcds beside
	// an external durable store, each NAME=URL,URL
	// (--datastore-partition-endpoint, repeated).
	PartitionEndpoints []string
	CAFile             string
	CertFile           string
	KeyFile            string
}

func (d *Datastore) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&d.Endpoint, "datastore-endpoint", d.Endpoint, "keep the durable store (everything but Events and Leases) in an external etcd cluster, not in an embedded etcd: its members' https URLs, comma separated, e.g. https://[fddf:4035:b520::5]:2379")
	fs.StringVar(&d.NoFsyncEndpoint, "no-fsync-datastore-endpoint", d.NoFsyncEndpoint, "keep Events and Leases in an external etcd cluster (run it with --unsafe-no-fsync for k1m's trade-off), not in the embedded no-fsync etcd: its members' https URLs, comma separated")
	fs.StringArrayVar(&d.PartitionEndpoints, "datastore-partition-endpoint", d.PartitionEndpoints, "with --datastore-endpoint, keep a partition of --etcd-partitions in an external etcd cluster of its own: NAME=URL,URL (its members' https URLs), once per partition, e.g. pods=https://[fddf:4035:b520::7]:2379")
	fs.StringVar(&d.CAFile, "datastore-cafile", d.CAFile, "CA certificate the external etcd's serving certificates are checked against")
	fs.StringVar(&d.CertFile, "datastore-certfile", d.CertFile, "client certificate kube-apiserver and k1m present to the external etcd (issued by --datastore-cafile's CA: the embedded etcds accept it too)")
	fs.StringVar(&d.KeyFile, "datastore-keyfile", d.KeyFile, "key of --datastore-certfile")
}

// External tells whether some store is an external etcd.
func (d Datastore) External() bool { return d.Endpoint != "" || d.NoFsyncEndpoint != "" }

// Endpoints splits a comma-separated endpoint flag value; empty: none.
func Endpoints(value string) []string {
	if value == "" {
		return nil
	}
	return strings.Split(value, ",")
}

// validate checks the endpoints' form and that the TLS files come with
// them, all three, and can be read.
func (d Datastore) validate() error {
	var errs []error
	for _, f := range []struct{ flag, value string }{
		{"--datastore-endpoint", d.Endpoint},
		{"--no-fsync-datastore-endpoint", d.NoFsyncEndpoint},
	} {
		if err := checkEndpoints(f.value); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", f.flag, f.value, err))
		}
	}
	files := []struct{ flag, path string }{
		{"--datastore-cafile", d.CAFile}, {"--datastore-certfile", d.CertFile}, {"--datastore-keyfile", d.KeyFile},
	}
	for _, f := range files {
		switch {
		case f.path == "" && d.External():
			errs = append(errs, fmt.Errorf("%s is empty: an external etcd (--datastore-endpoint, --no-fsync-datastore-endpoint) is reached with mutual TLS: give --datastore-cafile, --datastore-certfile and --datastore-keyfile", f.flag))
		case f.path != "" && !d.External():
			errs = append(errs, fmt.Errorf("%s without --datastore-endpoint or --no-fsync-datastore-endpoint: it is the TLS of an external etcd; add the endpoint or drop the flag", f.flag))
		case f.path != "":
			if _, err := os.ReadFile(f.path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
			}
		}
	}
	return errors.Join(errs...)
}

// checkEndpoints wants https URLs of host:port and nothing more, comma
// separated; empty is no external store.
func checkEndpoints(value string) error {
	if value == "" {
		return nil
	}
	for _, e := range Endpoints(value) {
		u, err := url.Parse(e)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return errors.New("want the https URLs of the etcd cluster's members, comma separated, e.g. https://[fddf:4035:b520::5]:2379,https://[fddf:4035:b520::6]:2379")
		}
	}
	return nil
}
