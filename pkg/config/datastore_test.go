package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestDatastoreFlags(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--datastore-cafile=" + ca, "--datastore-certfile=" + ca, "--datastore-keyfile=" + ca}
	durable := "--datastore-endpoint=https://[fddf:4035:b520::5]:2379"
	endpointHelp := "want the https URLs of the etcd cluster's members, comma separated, e.g. https://[fddf:4035:b520::5]:2379,https://[fddf:4035:b520::6]:2379"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"both stores external", append([]string{"--datastore-endpoint=https://[fddf:4035:b520::5]:2379,https://[fddf:4035:b520::6]:2379", "--no-fsync-datastore-endpoint=https://[fddf:4035:b520::7]:2379"}, tlsArgs...), ""},
		{"one store external", append([]string{"--no-fsync-datastore-endpoint=https://[fddf:4035:b520::7]:2379"}, tlsArgs...), ""},
		{"plain http", append([]string{"--datastore-endpoint=http://[fddf:4035:b520::5]:2379"}, tlsArgs...),
			`--datastore-endpoint "http://[fddf:4035:b520::5]:2379": ` + endpointHelp},
		{"no port", append([]string{"--no-fsync-datastore-endpoint=https://[fddf:4035:b520::5]"}, tlsArgs...),
			`--no-fsync-datastore-endpoint "https://[fddf:4035:b520::5]": ` + endpointHelp},
		{"a path", append([]string{"--datastore-endpoint=https://[fddf:4035:b520::5]:2379/k1m"}, tlsArgs...),
			`--datastore-endpoint "https://[fddf:4035:b520::5]:2379/k1m": ` + endpointHelp},
		{"no TLS files", []string{"--datastore-endpoint=https://[fddf:4035:b520::5]:2379", "--datastore-cafile=" + ca},
			"--datastore-certfile is empty: an external etcd (--datastore-endpoint, --no-fsync-datastore-endpoint) is reached with mutual TLS: give --datastore-cafile, --datastore-certfile and --datastore-keyfile\n" +
				"--datastore-keyfile is empty: an external etcd (--datastore-endpoint, --no-fsync-datastore-endpoint) is reached with mutual TLS: give --datastore-cafile, --datastore-certfile and --datastore-keyfile"},
		{"TLS without endpoint", []string{"--datastore-cafile=" + ca},
			"--datastore-cafile without --datastore-endpoint or --no-fsync-datastore-endpoint: it is the TLS of an external etcd; add the endpoint or drop the flag"},
		{"missing file", []string{"--datastore-endpoint=https://[fddf:4035:b520::5]:2379", "--datastore-cafile=" + ca, "--datastore-certfile=" + ca, "--datastore-keyfile=/nonexistent/etcd.key"},
			"--datastore-keyfile: open /nonexistent/etcd.key: no such file or directory"},
		{"cluster reset", append([]string{"--datastore-endpoint=https://[fddf:4035:b520::5]:2379", "--cluster-reset"}, tlsArgs...),
			"--cluster-reset and --datastore-endpoint: the durable store is the external etcd, which k1m does not reset or restore; restore it with etcd's own tools (etcdutl snapshot restore)"},
		{"partitions external", append([]string{durable, "--etcd-partitions=pods,nodes", "--datastore-partition-endpoint=pods=https://[fddf:4035:b520::7]:2379,https://[fddf:4035:b520::8]:2379",
			"--datastore-partition-endpoint=nodes=https://[fddf:4035:b520::9]:2379", "--no-fsync-etcd-port=2383"}, tlsArgs...), ""},
		{"a partition without its etcd", append([]string{durable, "--etcd-partitions=pods,nodes", "--datastore-partition-endpoint=nodes=https://[fddf:4035:b520::9]:2379"}, tlsArgs...),
			"--etcd-partitions pods with --datastore-endpoint: the durable store is external, and so is each partition: give --datastore-partition-endpoint pods=https://HOST:PORT[,...], its etcd's members"},
		{"an etcd of a partition not asked for", append([]string{durable, "--etcd-partitions=pods", "--datastore-partition-endpoint=pods=https://[fddf:4035:b520::7]:2379",
			"--datastore-partition-endpoint=nodes=https://[fddf:4035:b520::9]:2379"}, tlsArgs...),
			"--datastore-partition-endpoint nodes=...: --etcd-partitions does not name nodes: add it there (the same on every server) or drop this flag"},
		{"a partition's etcd with an embedded durable etcd", append([]string{"--no-fsync-datastore-endpoint=https://[fddf:4035:b520::5]:2379", "--etcd-partitions=pods",
			"--datastore-partition-endpoint=pods=https://[fddf:4035:b520::7]:2379"}, tlsArgs...),
			"--datastore-partition-endpoint pods=...: without --datastore-endpoint the durable etcd is embedded and so is every partition (--etcd-partitions); an external etcd per partition goes with an external durable store"},
		{"a partition's etcd without partitions", append([]string{durable, "--datastore-partition-endpoint=pods=https://[fddf:4035:b520::7]:2379"}, tlsArgs...),
			"--datastore-partition-endpoint pods=...: --etcd-partitions does not name pods: add it there (the same on every server) or drop this flag"},
		{"malformed partition etcds", append([]string{durable, "--etcd-partitions=pods", "--datastore-partition-endpoint=https://[fddf:4035:b520::7]:2379",
			"--datastore-partition-endpoint=leases=https://[fddf:4035:b520::7]:2379", "--datastore-partition-endpoint=pods=http://[fddf:4035:b520::7]:2379",
			"--datastore-partition-endpoint=pods=https://[fddf:4035:b520::7]:2379", "--datastore-partition-endpoint=pods=https://[fddf:4035:b520::8]:2379"}, tlsArgs...),
			`--datastore-partition-endpoint "https://[fddf:4035:b520::7]:2379": want NAME=URL,URL, a partition and its etcd members' https URLs, e.g. pods=https://[fddf:4035:b520::7]:2379` + "\n" +
				`--datastore-partition-endpoint "leases=https://[fddf:4035:b520::7]:2379": "leases" is not a resource k1m partitions: want one of pods, nodes, endpointslices, configmaps, secrets` + "\n" +
				`--datastore-partition-endpoint "pods=http://[fddf:4035:b520::7]:2379": ` + endpointHelp + "\n" +
				`--datastore-partition-endpoint "pods=https://[fddf:4035:b520::8]:2379": the pods partition is given twice`},
		{"a quota of an external partition", append([]string{durable, "--etcd-partitions=pods", "--datastore-partition-endpoint=pods=https://[fddf:4035:b520::7]:2379",
			"--etcd-partition-quota-backend-bytes=17179869184"}, tlsArgs...),
			"--etcd-partition-quota-backend-bytes 17179869184 with --datastore-endpoint: each partition is an external etcd (--datastore-partition-endpoint), whose quota is its own (its --quota-backend-bytes)"},
	} {
		s, err := parse(t, "", c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = s.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: error\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

func TestCompleteSplitsTheEndpoints(t *testing.T) {
	c := completeWithDatastore(t, "--datastore-endpoint=https://[fddf:4035:b520::5]:2379,https://[fddf:4035:b520::6]:2379")
	if want := []string{"https://[fddf:4035:b520::5]:2379", "https://[fddf:4035:b520::6]:2379"}; !reflect.DeepEqual(c.ExternalDurable, want) || c.ExternalNoFsync != nil {
		t.Errorf("ExternalDurable %q, ExternalNoFsync %q; want %q and none", c.ExternalDurable, c.ExternalNoFsync, want)
	}
	if c.ExternalPartitions != nil {
		t.Errorf("ExternalPartitions %q without partitions, want none", c.ExternalPartitions)
	}
}

// Each partition's external etcd resolves to its members' URLs by name.
func TestCompleteResolvesThePartitionsEtcds(t *testing.T) {
	c := completeWithDatastore(t, "--datastore-endpoint=https://[fddf:4035:b520::5]:2379", "--etcd-partitions=nodes,pods",
		"--datastore-partition-endpoint=pods=https://[fddf:4035:b520::7]:2379,https://[fddf:4035:b520::8]:2379",
		"--datastore-partition-endpoint=nodes=https://[fddf:4035:b520::9]:2379")
	want := map[string][]string{
		"pods":  {"https://[fddf:4035:b520::7]:2379", "https://[fddf:4035:b520::8]:2379"},
		"nodes": {"https://[fddf:4035:b520::9]:2379"},
	}
	if !reflect.DeepEqual(c.ExternalPartitions, want) {
		t.Errorf("ExternalPartitions %q, want %q", c.ExternalPartitions, want)
	}
}

// completeWithDatastore completes the flags args with a data directory
// and the external etcd's three TLS files.
func completeWithDatastore(t *testing.T, args ...string) *CompletedServer {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := parse(t, "", append(args, "--data-dir="+t.TempDir(), "--datastore-cafile="+ca, "--datastore-certfile="+ca, "--datastore-keyfile="+ca)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
