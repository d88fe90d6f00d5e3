package server

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/pki"
)

func serverWith(t *testing.T, d config.Datastore) *Server {
	t.Helper()
	flags := config.DefaultServer()
	flags.DataDir = t.TempDir()
	flags.Datastore = d
	cfg, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return &Server{cfg: cfg}
}

// Embedded stores: the etcd CA's client certificate, members trusting
// only the etcd CA. One store external: kube-apiserver presents the
// external etcd's certificate everywhere and checks servers against both
// CAs; the embedded members trust both for clients.
func TestStoreTLSFollowsTheDatastore(t *testing.T) {
	c := testCerts()
	embedded := serverWith(t, config.Datastore{})
	if got, want := embedded.storeTLS(c), (etcd.TLS{CertFile: "/t/apiserver-etcd-client.crt", KeyFile: "/t/apiserver-etcd-client.key", CAFile: "/t/etcd-ca.crt"}); got != want {
		t.Errorf("embedded: storeTLS %+v, want %+v", got, want)
	}
	if got, want := embedded.etcdServerTLS(c), (etcd.TLS{CertFile: "/t/etcd-server.crt", KeyFile: "/t/etcd-server.key", CAFile: "/t/etcd-ca.crt"}); got != want {
		t.Errorf("embedded: etcdServerTLS %+v, want %+v", got, want)
	}
	ca, cert, key := writeFile(t, "operator-ca.crt", "operator CA\n"), writeFile(t, "k1m.crt", "cert"), writeFile(t, "k1m.key", "key")
	external := serverWith(t, config.Datastore{Endpoint: "https://[fddf:4035:b520::5]:2379", CAFile: ca, CertFile: cert, KeyFile: key})
	if got, want := external.storeTLS(c), (etcd.TLS{CertFile: cert, KeyFile: key, CAFile: "/t/etcd-datastore-ca-bundle.crt"}); got != want {
		t.Errorf("external: storeTLS %+v, want %+v", got, want)
	}
	want := etcd.TLS{CertFile: "/t/etcd-server.crt", KeyFile: "/t/etcd-server.key", CAFile: "/t/etcd-ca.crt", ClientCAFile: "/t/etcd-datastore-ca-bundle.crt"}
	if got := external.etcdServerTLS(c); got != want {
		t.Errorf("external: etcdServerTLS %+v, want %+v", got, want)
	}
}

// The bundle is the etcd CA then the external CA; the record names the
// stores and the TLS, and goes when the stores are embedded again.
func TestDatastoreBundleAndRecord(t *testing.T) {
	ca := writeFile(t, "operator-ca.crt", "operator CA\n")
	s := serverWith(t, config.Datastore{NoFsyncEndpoint: "https://[fddf:4035:b520::7]:2379", CAFile: ca, CertFile: ca, KeyFile: ca})
	c := &certs{dir: t.TempDir(), etcd: authority{Authority: &pki.Authority{CertPEM: []byte("etcd CA\n")}}}
	if err := s.writeDatastoreCABundle(c); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(datastoreCABundle(c)); string(got) != "etcd CA\noperator CA\n" {
		t.Errorf("bundle %q", got)
	}
	if err := s.recordDatastore(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDatastore(s.cfg.DataDir)
	want := DatastoreRecord{Datastore: join.Datastore{NoFsync: []string{"https://[fddf:4035:b520::7]:2379"}}, TLS: etcd.TLS{CertFile: ca, KeyFile: ca, CAFile: ca}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("record %+v, %v; want %+v", got, err, want)
	}
	s.cfg.Datastore, s.cfg.ExternalNoFsync = config.Datastore{}, nil
	if err := s.recordDatastore(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, "datastore.json")); !os.IsNotExist(err) {
		t.Errorf("the record stayed with both stores embedded: %v", err)
	}
}

// kube-apiserver's partitions beside an external durable store are the
// partitions' external etcds, in the partitions' order; embedded ones are
// the members', found elsewhere.
func TestExternalPartitionStores(t *testing.T) {
	pods, _ := constants.StorePartitionNamed("pods")
	nodes, _ := constants.StorePartitionNamed("nodes")
	s := &Server{cfg: &config.CompletedServer{Partitions: []constants.StorePartition{pods, nodes},
		ExternalPartitions: map[string][]string{"nodes": {"https://[fddf::9]:2379"}, "pods": {"https://[fddf::7]:2379", "https://[fddf::8]:2379"}}}}
	want := []partitionStore{{pods, []string{"https://[fddf::7]:2379", "https://[fddf::8]:2379"}}, {nodes, []string{"https://[fddf::9]:2379"}}}
	if got := s.externalPartitionStores(); !reflect.DeepEqual(got, want) {
		t.Errorf("externalPartitionStores() = %+v, want %+v", got, want)
	}
	s.cfg.ExternalPartitions = nil
	if got := s.externalPartitionStores(); got != nil {
		t.Errorf("embedded partitions: externalPartitionStores() = %+v, want none", got)
	}
}
