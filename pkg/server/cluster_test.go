package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/nodename"
)

func TestCheckClusterSettingsNamesEveryFlagThatDiffers(t *testing.T) {
	flags := config.DefaultServer()
	flags.DataDir = t.TempDir()
	cfg, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	same := join.Settings{RenewInterval: cfg.Lease.RenewInterval, ClusterDomain: cfg.ClusterDomain, ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: cfg.ServiceCIDR, PodRoutes: cfg.Routes}
	if err := checkClusterSettings(cfg, same, false, join.Datastore{}); err != nil {
		t.Errorf("the same settings: %v", err)
	}
	other := join.Settings{RenewInterval: 5 * time.Second, ClusterDomain: "k1m.example", ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: "fddf:4035:b511::/108", PodRoutes: constants.PodRoutesProvider}
	err = checkClusterSettings(cfg, other, true, join.Datastore{Durable: []string{"https://[fddf:4035:b520::5]:2379"}})
	want := "--node-lease-renew-interval 10s differs from the cluster's 5s: every server of a cluster has the same; start this one with --node-lease-renew-interval=5s\n" +
		"--cluster-domain cluster.local differs from the cluster's k1m.example: every server of a cluster has the same; start this one with --cluster-domain=k1m.example\n" +
		"--service-cidr fddf:4035:b510::/108 differs from the cluster's fddf:4035:b511::/108: every server of a cluster has the same; start this one with --service-cidr=fddf:4035:b511::/108\n" +
		"--secrets-encryption false differs from the cluster's true: every server of a cluster has the same; start this one with --secrets-encryption=true\n" +
		"--pod-routes k1m differs from the cluster's provider: every server of a cluster has the same, k1m or provider, chosen when the cluster is made; start this one with --pod-routes=provider\n" +
		"--datastore-endpoint is not set: the cluster keeps this store in the external etcd at https://[fddf:4035:b520::5]:2379; start this one with --datastore-endpoint=https://[fddf:4035:b520::5]:2379"
	if err == nil || err.Error() != want {
		t.Errorf("differing settings:\n%v\nwant\n%s", err, want)
	}
}

// A server joining (or restarting) with the other --pod-routes is refused
// by name, both ways: the cluster's mode is chosen when it is made.
func TestPodRoutesAreTheClusters(t *testing.T) {
	for _, c := range []struct {
		flag    string // --pod-routes; empty: the default
		cluster constants.PodRoutes
		want    string // empty: accepted
	}{
		{"", constants.PodRoutesProvider, "--pod-routes k1m differs from the cluster's provider: every server of a cluster has the same, k1m or provider, chosen when the cluster is made; start this one with --pod-routes=provider"},
		{"provider", constants.PodRoutesK1m, "--pod-routes provider differs from the cluster's k1m: every server of a cluster has the same, k1m or provider, chosen when the cluster is made; start this one with --pod-routes=k1m"},
		{"provider", constants.PodRoutesProvider, ""},
		{"", constants.PodRoutesK1m, ""},
	} {
		flags := config.DefaultServer()
		flags.DataDir = t.TempDir()
		if c.flag != "" {
			flags.PodRoutes = c.flag
		}
		cfg, err := flags.Complete()
		if err != nil {
			t.Fatal(err)
		}
		cluster := join.Settings{RenewInterval: cfg.Lease.RenewInterval, ClusterDomain: cfg.ClusterDomain, ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: cfg.ServiceCIDR, PodRoutes: c.cluster}
		joined, restarted := checkClusterSettings(cfg, cluster, false, join.Datastore{}), checkPodRoutes(cfg.Routes, c.cluster)
		for what, err := range map[string]error{"joining": joined, "restarting in": restarted} {
			if (c.want == "" && err != nil) || (c.want != "" && (err == nil || err.Error() != c.want)) {
				t.Errorf("--pod-routes=%s %s a %s cluster:\n got %v\nwant %q", cfg.Routes, what, c.cluster, err, c.want)
			}
		}
	}
}

// A server on an external etcd joining a cluster on others (or on the
// servers' embedded etcds) is refused; the same members in another order
// are the same store.
func TestCheckClusterSettingsComparesTheStores(t *testing.T) {
	ca := writeFile(t, "ca.crt", "x")
	flags := config.DefaultServer()
	flags.DataDir = t.TempDir()
	flags.Datastore = config.Datastore{Endpoint: "https://[fddf:4035:b520::6]:2379,https://[fddf:4035:b520::5]:2379",
		NoFsyncEndpoint: "https://[fddf:4035:b520::7]:2379", CAFile: ca, CertFile: ca, KeyFile: ca}
	cfg, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	same := join.Settings{RenewInterval: cfg.Lease.RenewInterval, ClusterDomain: cfg.ClusterDomain, ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: cfg.ServiceCIDR, PodRoutes: cfg.Routes}
	stores := join.Datastore{Durable: []string{"https://[fddf:4035:b520::5]:2379", "https://[fddf:4035:b520::6]:2379"}, NoFsync: []string{"https://[fddf:4035:b520::7]:2379"}}
	if err := checkClusterSettings(cfg, same, false, stores); err != nil {
		t.Errorf("the same stores: %v", err)
	}
	err = checkClusterSettings(cfg, same, false, join.Datastore{Durable: []string{"https://[fddf:4035:b520::9]:2379"}})
	want := "--datastore-endpoint https://[fddf:4035:b520::5]:2379,https://[fddf:4035:b520::6]:2379 differs from the cluster's https://[fddf:4035:b520::9]:2379: every server of a cluster has the same; start this one with --datastore-endpoint=https://[fddf:4035:b520::9]:2379\n" +
		"--no-fsync-datastore-endpoint https://[fddf:4035:b520::7]:2379: the cluster keeps this store in its servers' embedded etcd; start this one without --no-fsync-datastore-endpoint"
	if err == nil || err.Error() != want {
		t.Errorf("other stores:\n%v\nwant\n%s", err, want)
	}
}

// Each partition's external etcd is compared as the stores are; a
// partition only one side has is the layout check's.
func TestCheckClusterSettingsComparesThePartitionsEtcds(t *testing.T) {
	ca := writeFile(t, "ca.crt", "x")
	flags := config.DefaultServer()
	flags.DataDir = t.TempDir()
	flags.EtcdPartitions = []string{"pods", "nodes"}
	flags.Datastore = config.Datastore{Endpoint: "https://[fddf:4035:b520::5]:2379", CAFile: ca, CertFile: ca, KeyFile: ca,
		PartitionEndpoints: []string{"pods=https://[fddf:4035:b520::8]:2379,https://[fddf:4035:b520::7]:2379", "nodes=https://[fddf:4035:b520::9]:2379"}}
	cfg, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	same := join.Settings{RenewInterval: cfg.Lease.RenewInterval, ClusterDomain: cfg.ClusterDomain, ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: cfg.ServiceCIDR, PodRoutes: cfg.Routes}
	durable := []string{"https://[fddf:4035:b520::5]:2379"}
	stores := join.Datastore{Durable: durable, Partitions: map[string][]string{
		"pods":  {"https://[fddf:4035:b520::7]:2379", "https://[fddf:4035:b520::8]:2379"},
		"nodes": {"https://[fddf:4035:b520::9]:2379"},
	}}
	if err := checkClusterSettings(cfg, same, false, stores); err != nil {
		t.Errorf("the same etcds: %v", err)
	}
	if err := checkClusterSettings(cfg, same, false, join.Datastore{Durable: durable, Partitions: map[string][]string{"pods": stores.Partitions["pods"]}}); err != nil {
		t.Errorf("a partition the cluster lacks: %v, want it left to the layout check", err)
	}
	err = checkClusterSettings(cfg, same, false, join.Datastore{Durable: durable, Partitions: map[string][]string{
		"pods":  {"https://[fddf:4035:b520::a]:2379"},
		"nodes": {"https://[fddf:4035:b520::9]:2379"},
	}})
	want := "--datastore-partition-endpoint pods https://[fddf:4035:b520::7]:2379,https://[fddf:4035:b520::8]:2379 differs from the cluster's https://[fddf:4035:b520::a]:2379: every server of a cluster has the same; start this one with --datastore-partition-endpoint pods=https://[fddf:4035:b520::a]:2379"
	if err == nil || err.Error() != want {
		t.Errorf("another etcd for pods:\n%v\nwant\n%s", err, want)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Servers upgraded from a build before the kubelet serving CA: the first
// records its CA; another that made its own at this start is refused, the
// CA it made removed, naming what to copy; with the cluster's CA copied
// in it passes.
func TestKubeletServingCAIsTheClusters(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	first, err := loadOrIssueCerts(t.TempDir(), testNames)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: &config.CompletedServer{}, out: io.Discard}
	if err := s.checkKubeletServingCA(ctx, client, first); err != nil {
		t.Fatalf("the first server: %v", err)
	}
	dir := t.TempDir()
	second, err := loadOrIssueCerts(dir, testNames)
	if err != nil || !second.kubeletServingMade {
		t.Fatalf("second server: %v, made %v", err, second.kubeletServingMade)
	}
	err = s.checkKubeletServingCA(ctx, client, second)
	want := "this server's kubelet serving CA (" + second.kubeletServing.cert + ") was made at this start (the data directory is from a build before it) and is not the cluster's: it is removed again; copy kubelet-serving-ca.crt and kubelet-serving-ca.key from the DATA-DIR/tls of a server started with this build before, then start this one again"
	if err == nil || err.Error() != want {
		t.Errorf("a second CA:\n got %v\nwant %s", err, want)
	}
	if fsutil.Exists(second.kubeletServing.cert) || fsutil.Exists(second.kubeletServing.key) {
		t.Error("the CA made at this start is still there")
	}
	for _, ext := range []string{".crt", ".key"} {
		data, _ := os.ReadFile(filepath.Join(first.dir, constants.KubeletServingCA+ext))
		os.WriteFile(filepath.Join(dir, constants.KubeletServingCA+ext), data, 0o600)
	}
	copied, err := loadOrIssueCerts(dir, testNames)
	if err != nil || copied.kubeletServingMade {
		t.Fatalf("with the cluster's CA copied in: %v, made %v", err, copied.kubeletServingMade)
	}
	if err := s.checkKubeletServingCA(ctx, client, copied); err != nil {
		t.Errorf("with the cluster's CA copied in: %v", err)
	}
}

// A data directory made for one node name refuses another, naming both
// and the flag, given or not (package nodename tests the record itself).
func TestNodeNameIsTheDataDirectorys(t *testing.T) {
	dir := t.TempDir()
	if err := checkNodeName(dir, "", "vm"); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := nodename.Record(dir, "vm"); err != nil {
		t.Fatal(err)
	}
	if err := checkNodeName(dir, "", "vm"); err != nil {
		t.Errorf("restart: %v", err)
	}
	for _, c := range []struct{ given, want string }{
		{"k1m-server-1", "--node-name k1m-server-1: the data directory " + dir + " was made for node vm: start it with --node-name vm, or give this node an empty --data-dir (and remove the old one: k1m kubectl delete node vm)"},
		{"", "--node-name (not given: the host name, k1m-server-1): the data directory " + dir + " was made for node vm: start it with --node-name vm, or give this node an empty --data-dir (and remove the old one: k1m kubectl delete node vm)"},
	} {
		if err := checkNodeName(dir, c.given, "k1m-server-1"); err == nil || err.Error() != c.want {
			t.Errorf("--node-name %q:\n got %v\nwant %s", c.given, err, c.want)
		}
	}
}
