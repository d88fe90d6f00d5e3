package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/constants"
)

func parse(t *testing.T, file string, args ...string) (Server, error) {
	t.Helper()
	s := DefaultServer()
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	s.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if file != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := ApplyFile(fs, path, true); err != nil {
			return s, err
		}
	}
	return s, nil
}

func TestFileSetsWhatFlagsDoNot(t *testing.T) {
	s, err := parse(t, "node-lease-renew-interval: 30s\ncluster-domain: k1m.example\ndisable-agent: true\nhttps-listen-port: 7443\n",
		"--cluster-domain=flag.example")
	if err != nil {
		t.Fatal(err)
	}
	if s.RenewInterval != 30*time.Second || !s.DisableAgent || s.HTTPSPort != 7443 {
		t.Errorf("file values not applied: %+v", s)
	}
	if s.ClusterDomain != "flag.example" {
		t.Errorf("cluster-domain %q: the command line must win over the file", s.ClusterDomain)
	}
}

func TestFileErrorsNameTheKey(t *testing.T) {
	if _, err := parse(t, "node-lease-renew-intervall: 30s\n"); err == nil || !strings.Contains(err.Error(), `unknown key "node-lease-renew-intervall"`) || !strings.Contains(err.Error(), "node-lease-renew-interval") {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := parse(t, "https-listen-port: many\n"); err == nil || !strings.Contains(err.Error(), "key https-listen-port") {
		t.Errorf("bad value: %v", err)
	}
	if err := ApplyFile(pflag.NewFlagSet("x", pflag.ContinueOnError), "/nonexistent/k1m.yaml", true); err == nil {
		t.Error("an explicit missing file was accepted")
	}
	if err := ApplyFile(pflag.NewFlagSet("x", pflag.ContinueOnError), "/nonexistent/k1m.yaml", false); err != nil {
		t.Errorf("the default file may be absent: %v", err)
	}
}

func TestDefaultsAreValid(t *testing.T) {
	s := DefaultServer()
	if err := s.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	c, err := s.Complete()
	if err != nil {
		t.Fatal(err)
	}
	if c.DNSServiceIP.String() != "fddf:4035:b510::a" || c.KubernetesServiceIP.String() != "fddf:4035:b510::1" {
		t.Errorf("Service IPs: kubernetes %v, DNS %v", c.KubernetesServiceIP, c.DNSServiceIP)
	}
}

func TestValidateNamesFlagAndForm(t *testing.T) {
	cases := map[string]string{
		"--service-cidr=10.0.0.0/24":                   "--service-cidr 10.0.0.0/24 is IPv4",
		"--cluster-cidr=192.168.0.0/16":                "--cluster-cidr 192.168.0.0/16 is IPv4",
		"--cluster-cidr=fddf:4035::/32":                "want a prefix from /44 to /64",
		"--service-cidr=fddf:4035:b510::/96":           "want a /108 or smaller",
		"--service-cidr=fddf:4035:b500::/108":          "overlap",
		"--bind-address=0.0.0.0":                       "--bind-address \"0.0.0.0\": want an IPv6 address",
		"--node-ip=10.1.2.3":                           "--node-ip \"10.1.2.3\": want an IPv6 address",
		"--node-lease-renew-interval=0s":               "--node-lease-renew-interval 0s: want a whole number of seconds",
		"--node-lease-renew-interval=1500ms":           "want a whole number of seconds",
		"--no-fsync-etcd-port=2380":                    "--etcd-port (peer, +1) and --no-fsync-etcd-port use the same port 2380: every listener needs its own (each etcd also takes the port after its own)",
		"--https-listen-port=10250":                    "--https-listen-port and the kubelet use the same port 10250",
		"--https-listen-port=6445":                     "--https-listen-port and the server's readiness use the same port 6445",
		"--node-name=Node-1":                           `--node-name "Node-1": want a lower-case DNS-1123 subdomain`,
		"--cluster-domain=Cluster_Local":               `--cluster-domain "Cluster_Local": want a DNS domain of lower-case labels, e.g. cluster.local`,
		"--service-cidr=fddf:4035:b510::/126":          "--service-cidr fddf:4035:b510::/126 holds 4 addresses: the kubernetes Service takes the 1st and cluster DNS the 10th; want a /124 or larger",
		"--node-lease-renew-interval=5m":               "--node-lease-renew-interval 5m0s: want at most 2m0s: a node is declared NotReady five intervals after its last renewal (10m0s at the most)",
		"--no-fsync-data-dir=/var/lib/k1m/server/etcd": "--no-fsync-data-dir /var/lib/k1m/server/etcd is, holds or lies inside the durable etcd's directory /var/lib/k1m/server/etcd",
		"--no-fsync-data-dir=/var/lib/k1m/server":      "--no-fsync-data-dir /var/lib/k1m/server is, holds or lies inside",
		"--https-listen-port=0":                        "--https-listen-port 0: want a port",
		"--token=short":                                "--token: the token secret \"<redacted>\" is not a bootstrap token",
		"--token=abcdef.0123456789abcdef":              "--token: the token secret abcdef.<redacted> is the documentation's example, which anyone can read: choose your own (k1m token create prints a random one) or leave it empty to have one generated",
		"--etcd-snapshot-schedule-cron=every day":      `--etcd-snapshot-schedule-cron "every day": expected exactly 5 fields, found 2: [every day]; want cron's five fields`,
		"--etcd-snapshot-retention=0":                  "--etcd-snapshot-retention 0: want 1 or more snapshots kept",
		"--cluster-reset-restore-path=/tmp/snap":       "--cluster-reset-restore-path /tmp/snap without --cluster-reset: add --cluster-reset to restore it",
		"--etcd-quota-backend-bytes=1000":              "--etcd-quota-backend-bytes 1000: want from 16777216 (16 MiB) to 68719476736 (64 GiB); the default is 8589934592 (8 GiB)",
		"--memory-limit=512Mi":                         `--memory-limit "512Mi": want a size of at least 1Gi, such as 6Gi or 6442450944, or leave it unset for the sizing rule`,
		"--memory-limit=6 GB":                          `--memory-limit "6 GB": want a size of at least 1Gi`,
		"--pod-logs-dir=pod-logs":                      `--pod-logs-dir "pod-logs": want an absolute directory path, e.g. /var/log/pods`,
		"--scheduler-percentage-of-nodes-to-score=101": "--scheduler-percentage-of-nodes-to-score 101: want a percentage from 1 to 100, e.g. 1, or 0 for upstream's adaptive default",
		"--scheduler-percentage-of-nodes-to-score=-1":  "--scheduler-percentage-of-nodes-to-score -1: want a percentage from 1 to 100",
		"--kube-scheduler-arg=kube-api-qps=fast":       `--kube-scheduler-arg "kube-api-qps=fast": want requests a second, a number of at least 0, e.g. kube-api-qps=500`,
		"--disable=traefik":                            `--disable "traefik": want packaged components, comma separated, of local-storage, metrics-server, network-policy`,
		"--default-local-storage-path=storage":         `--default-local-storage-path "storage": want an absolute, clean directory path other than /, e.g. /var/lib/k1m/storage`,
		"--default-local-storage-path=/var/lib/../x":   `--default-local-storage-path "/var/lib/../x": want an absolute, clean directory path`,
		"--etcd-partitions=pods,leases":                `--etcd-partitions: "leases" is not a resource k1m partitions: want some of pods, nodes, endpointslices, configmaps, secrets, comma separated, e.g. pods,nodes`,
		"--etcd-partitions=pods,pods":                  `--etcd-partitions: "pods" is given twice`,
		"--etcd-partition-quota-backend-bytes=1000":    "--etcd-partition-quota-backend-bytes 1000: the store has no partitions (--etcd-partitions)",
		"--no-fsync-quota-backend-bytes=1000":          "--no-fsync-quota-backend-bytes 1000: want from 16777216 (16 MiB) to 68719476736 (64 GiB), or 0 for the default 8589934592 (8 GiB)",
		"--kube-scheduler-arg=config=/etc/s.yaml":      `--kube-scheduler-arg "config=/etc/s.yaml" collides with --config, which k1m sets for kube-scheduler itself: k1m writes the scheduler's configuration file`,
	}
	for arg, want := range cases {
		s, err := parse(t, "", arg)
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", arg, err, want)
		}
	}
}

// --disable takes a comma-separated list from a flag or a YAML list in
// the config file.
func TestDisable(t *testing.T) {
	for _, c := range []struct {
		file string
		args []string
		want []string
	}{
		{"", nil, nil},
		{"", []string{"--disable=local-storage"}, []string{"local-storage"}},
		{"disable: [local-storage]\n", nil, []string{"local-storage"}},
	} {
		s, err := parse(t, c.file, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("file %q, flags %q: %v", c.file, c.args, err)
		}
		if !slices.Equal(s.Disable, c.want) {
			t.Errorf("file %q, flags %q: --disable %q, want %q", c.file, c.args, s.Disable, c.want)
		}
	}
}

// --pod-routes defaults to k1m, takes provider from a flag or the config
// file, resolves to its constant, and refuses anything else whole.
func TestPodRoutes(t *testing.T) {
	for _, c := range []struct {
		file string
		args []string
		want constants.PodRoutes
	}{
		{"", nil, constants.PodRoutesK1m},
		{"", []string{"--pod-routes=provider"}, constants.PodRoutesProvider},
		{"pod-routes: provider\n", nil, constants.PodRoutesProvider},
		{"pod-routes: provider\n", []string{"--pod-routes=k1m"}, constants.PodRoutesK1m},
	} {
		s, err := parse(t, c.file, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Complete()
		if err != nil {
			t.Fatalf("file %q, flags %q: %v", c.file, c.args, err)
		}
		if got.Routes != c.want {
			t.Errorf("file %q, flags %q: routes %s, want %s", c.file, c.args, got.Routes, c.want)
		}
	}
	for _, bad := range []string{"", "Provider", "host-gw"} {
		s, err := parse(t, "", "--pod-routes="+bad)
		if err != nil {
			t.Fatal(err)
		}
		want := `--pod-routes "` + bad + `": want k1m or provider (k1m: the servers publish each node's route and every node installs the others'; provider: the provider's network routes each node's pod range to the node)`
		if err := s.Validate(); err == nil || err.Error() != want {
			t.Errorf("--pod-routes=%s:\n got %v\nwant %s", bad, err, want)
		}
	}
}

// countSetting is a case of an integer setting: its value once a config
// file and flags are completed.
type countSetting struct {
	file string
	args []string
	want int
}

// requireCounts completes each case and wants setting of the result.
func requireCounts(t *testing.T, what string, setting func(*CompletedServer) int, cases []countSetting) {
	t.Helper()
	for _, c := range cases {
		s, err := parse(t, c.file, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Complete()
		if err != nil {
			t.Fatalf("file %q, flags %q: %v", c.file, c.args, err)
		}
		if n := setting(got); n != c.want {
			t.Errorf("file %q, flags %q: %d %s, want %d", c.file, c.args, n, what, c.want)
		}
	}
}

// requireRefused wants Validate to refuse the flags with exactly want.
func requireRefused(t *testing.T, want string, args ...string) {
	t.Helper()
	s, err := parse(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err == nil || err.Error() != want {
		t.Errorf("%q:\n got %v\nwant %s", args, err, want)
	}
}

// --dns-nodes-per-replica defaults to constants.DNSNodesPerReplica, takes
// 0 (scaling off) from a flag or the config file, and refuses a negative
// count whole.
func TestDNSNodesPerReplica(t *testing.T) {
	requireCounts(t, "nodes per replica", func(c *CompletedServer) int { return c.DNSNodesPerReplica }, []countSetting{
		{"", nil, constants.DNSNodesPerReplica},
		{"", []string{"--dns-nodes-per-replica=0"}, 0},
		{"dns-nodes-per-replica: 500\n", nil, 500},
	})
	requireRefused(t, "--dns-nodes-per-replica -1: want nodes per CoreDNS replica, e.g. 100, or 0 to leave its replicas as they are set", "--dns-nodes-per-replica=-1")
}

// --pod-route-events-per-second defaults to
// constants.PodRouteEventsPerSecond, takes a count from a flag or the
// config file, and refuses one out of range whole.
func TestPodRouteEventsPerSecond(t *testing.T) {
	requireCounts(t, "route events a second", func(c *CompletedServer) int { return c.PodRouteEventsPerSecond }, []countSetting{
		{"", nil, constants.PodRouteEventsPerSecond},
		{"", []string{"--pod-route-events-per-second=2500"}, 2500},
		{"pod-route-events-per-second: 1\n", nil, 1},
	})
	for _, n := range []string{"0", "10000001"} {
		requireRefused(t, "--pod-route-events-per-second "+n+": want route events a second summed over the nodes, from 1 to 10000000, e.g. 100000 (the route publisher writes that over the node count routes a second, from 5 to 200)",
			"--pod-route-events-per-second="+n)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	s, _ := parse(t, "", "--service-cidr=10.0.0.0/24", "--bind-address=0.0.0.0")
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "--service-cidr") || !strings.Contains(err.Error(), "--bind-address") {
		t.Errorf("want both problems at once, got %v", err)
	}
}

func TestLeaseProfile(t *testing.T) {
	for renew, want := range map[time.Duration]LeaseProfile{
		10 * time.Second: {10 * time.Second, 40 * time.Second, 50 * time.Second},
		30 * time.Second: {30 * time.Second, 120 * time.Second, 150 * time.Second},
	} {
		got, err := LeaseProfileFor(renew)
		if err != nil || got != want {
			t.Errorf("LeaseProfileFor(%v) = %+v, %v; want %+v", renew, got, err, want)
		}
		if got.RenewInterval >= got.LeaseDuration || got.GracePeriod <= got.LeaseDuration {
			t.Errorf("profile %+v breaks renew < lease < grace", got)
		}
	}
	if p, _ := LeaseProfileFor(10 * time.Second); p.LeaseDurationSeconds() != 40 {
		t.Errorf("LeaseDurationSeconds %d", p.LeaseDurationSeconds())
	}
}

func TestPassThroughFromFlagsAndFile(t *testing.T) {
	s, err := parse(t, "kube-apiserver-arg:\n- feature-gates=WatchList=true,ConsistentListFromCache=true\n- max-requests-inflight=800\nkubelet-arg: [v=2]\n",
		"--kube-scheduler-arg=v=3", "--kube-scheduler-arg=profiling=true")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.PassThrough()
	if err != nil {
		t.Fatal(err)
	}
	want := PassThrough{
		"kube-apiserver":          {{Name: "feature-gates", Value: "WatchList=true,ConsistentListFromCache=true"}, {Name: "max-requests-inflight", Value: "800"}},
		"kube-controller-manager": nil,
		"kube-scheduler":          {{Name: "v", Value: "3"}, {Name: "profiling", Value: "true"}},
		"kubelet":                 {{Name: "v", Value: "2"}},
		"kube-proxy":              nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestPassThroughCollisionStopsValidate(t *testing.T) {
	s, _ := parse(t, "", "--kube-apiserver-arg=etcd-servers=https://[::1]:1", "--kube-proxy-arg=oops")
	err := s.Validate()
	want := []string{
		`--kube-apiserver-arg "etcd-servers=https://[::1]:1" collides with --etcd-servers, which k1m sets for kube-apiserver itself: k1m runs the durable etcd`,
		`--kube-proxy-arg "oops": want ` + componentargs.Form,
	}
	if err == nil {
		t.Fatal("accepted")
	}
	got := strings.Split(err.Error(), "\n")
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestAuditFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n"), 0o600)
	s, _ := parse(t, "", "--audit-policy-file="+good, "--audit-log-path="+filepath.Join(dir, "audit.log"))
	if err := s.Validate(); err != nil {
		t.Errorf("a good policy: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--audit-policy-file=" + good}, "--audit-policy-file " + good + " without --audit-log-path: give the file the audit log goes to"},
		{[]string{"--audit-policy-file=" + bad, "--audit-log-path=/x"}, "--audit-policy-file: "},
		{[]string{"--audit-log-maxage=-1"}, "--audit-log-maxage -1: want 0 or more (0: no limit)"},
	} {
		s, _ := parse(t, "", c.args...)
		if err := s.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
}

func TestAgentTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := "K1M" + strings.Repeat("a", 64) + "::abcdef.0123456789abcdef"
	path := filepath.Join(dir, "join-token")
	os.WriteFile(path, []byte(good+"\n"), 0o600)
	a := DefaultAgent()
	a.Token, a.TokenFile = "", path
	if err := a.ReadTokenFile(); err != nil || a.Token != good {
		t.Fatalf("ReadTokenFile: %q, %v", a.Token, err)
	}
	gone := DefaultAgent()
	gone.Token, gone.TokenFile = "", filepath.Join(dir, "deleted-after-the-join")
	if err := gone.ReadTokenFile(); err != nil || gone.Token != "" {
		t.Errorf("a missing token file (deleted after the join) must not stop a restart: %q, %v", gone.Token, err)
	}
	os.WriteFile(path, []byte("nonsense"), 0o600)
	bad := DefaultAgent()
	bad.Token, bad.TokenFile = "", path
	if err := bad.ReadTokenFile(); err == nil || !strings.HasPrefix(err.Error(), "--token-file "+path+": --token is not of the form") {
		t.Errorf("a bad token file: %v", err)
	}
	both := DefaultAgent()
	both.Server, both.Token, both.TokenFile = "https://[::1]:6443", good, path
	if err := both.Validate(); err == nil || err.Error() != "--token and --token-file are both given: give one" {
		t.Errorf("both: %v", err)
	}
	server := DefaultAgent()
	server.Server, server.Token = "https://[::1]:6443", good+"::"+strings.Repeat("a", 52)
	if err := server.Validate(); err == nil || err.Error() != "--token is a server token (DATA-DIR/server-token): it opens the cluster's CA keys and belongs on servers only; give agents the join token (DATA-DIR/token, or k1m token create)" {
		t.Errorf("a server token for an agent: %v", err)
	}
	os.WriteFile(path, []byte(server.Token), 0o600)
	serverFile := DefaultAgent()
	serverFile.TokenFile = path
	if err := serverFile.ReadTokenFile(); err == nil || err.Error() != "--token-file "+path+" holds a server token (DATA-DIR/server-token): it opens the cluster's CA keys and belongs on servers only; give agents the join token (DATA-DIR/token, or k1m token create)" || serverFile.Token != "" {
		t.Errorf("a server token in an agent's --token-file: %v (token %q)", err, serverFile.Token)
	}
}

func TestCompleteResolvesOnce(t *testing.T) {
	s, _ := parse(t, "", "--data-dir=/srv/k1m", "--node-lease-renew-interval=30s", "--service-cidr=fddf:4035:b511::/112", "--kubelet-arg=v=2")
	c, err := s.Complete()
	if err != nil {
		t.Fatal(err)
	}
	want := LeaseProfile{RenewInterval: 30 * time.Second, LeaseDuration: 120 * time.Second, GracePeriod: 150 * time.Second}
	if c.Lease != want || c.NoFsyncDataDir != "/srv/k1m/etcd-nofsync" || c.KubernetesServiceIP.String() != "fddf:4035:b511::1" ||
		c.DNSServiceIP.String() != "fddf:4035:b511::a" || !reflect.DeepEqual(c.PassThrough["kubelet"], []componentargs.Arg{{Name: "v", Value: "2"}}) {
		t.Errorf("completed %+v", c)
	}
	if c.ServicePrefix != netip.MustParsePrefix("fddf:4035:b511::/112") || c.ClusterPrefix != netip.MustParsePrefix(DefaultClusterCIDR) {
		t.Errorf("ranges completed to service %v, cluster %v", c.ServicePrefix, c.ClusterPrefix)
	}
	s.NoFsyncDataDir = "/run/k1m-nofsync"
	if c, _ := s.Complete(); c.NoFsyncDataDir != "/run/k1m-nofsync" {
		t.Errorf("--no-fsync-data-dir given, completed to %q", c.NoFsyncDataDir)
	}
	s.RenewInterval = 1500 * time.Millisecond
	if c, err := s.Complete(); c != nil || err == nil {
		t.Errorf("an invalid server completed: %v", err)
	}
}

func TestConfigFileIsReadStrictly(t *testing.T) {
	cases := map[string]string{
		"node-name: 0123\n":                                  `key node-name (line 1): YAML reads "0123" as a number, but --node-name takes a string: quote it (node-name: "0123")`,
		"node-lease-renew-interval: 10\n":                    `--node-lease-renew-interval takes a duration such as 10s (a string)`,
		"disable-agent: \"yes\"\n":                           `YAML reads "yes" as a string, but --disable-agent takes true or false`,
		"https-listen-port: 7443\nhttps-listen-port: 8443\n": "key https-listen-port is given twice (lines 1 and 2): give it once",
		"cluster-domain: [a, b]\n":                           "a list, but --cluster-domain takes one string value",
		"- node-lease-renew-interval\n":                      "want a mapping of flag names to values at the top",
	}
	for file, want := range cases {
		_, err := parse(t, file)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", file, err, want)
		}
	}
	s, err := parse(t, "node-name: \"no\"\nhttps-listen-port: 7443\ndisable-agent: true\n# comment\n")
	if err != nil || s.NodeName != "no" || s.HTTPSPort != 7443 || !s.DisableAgent {
		t.Errorf("quoted and typed values: %+v, %v", s, err)
	}
	// YAML 1.2, not 1.1: "no" is the string it looks like, never false.
	if s, err := parse(t, "node-name: no\n"); err != nil || s.NodeName != "no" {
		t.Errorf("node-name: no gave %q, %v", s.NodeName, err)
	}
	if _, err := parse(t, "# nothing but a comment\n"); err != nil {
		t.Errorf("a file of comments: %v", err)
	}
}

func TestJoinFlags(t *testing.T) {
	const token = "K1M" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
	for _, c := range []struct {
		args []string
		want string // the whole error; empty: valid
	}{
		{[]string{"--cluster-init"}, ""},
		{[]string{"--server", "https://[fddf:4035:b520::1:1]:6443", "--token", token}, ""},
		{[]string{"--cluster-init", "--server", "https://[fddf:4035:b520::1:1]:6443", "--token", token},
			"--cluster-init and --server: the first server starts the cluster (--cluster-init), the others join it (--server URL --token T): give one"},
		{[]string{"--server", "http://[fddf:4035:b520::1:1]:6443", "--token", token},
			`--server "http://[fddf:4035:b520::1:1]:6443": want the https URL of a server of the cluster, e.g. https://[fddf:4035:b520::1:1]:6443`},
		{[]string{"--disable-etcd", "--server", "https://[fddf:4035:b520::1:1]:6443", "--token", token}, ""},
		{[]string{"--disable-etcd"},
			"--disable-etcd needs --server: an API-server-only server runs over the etcd members of an existing cluster, which it joins (the first server runs etcd: --cluster-init)"},
		{[]string{"--disable-etcd", "--server", "https://[fddf:4035:b520::1:1]:6443", "--token", token, "--cluster-reset"},
			"--disable-etcd and --cluster-reset: this server has no etcd to reset; run the reset on a server that has one"},
		{[]string{"--server", "https://[fddf:4035:b520::1:1]:6443"},
			"--token is empty: joining a server (--server) needs the cluster's server token (a server's DATA-DIR/server-token), in --token-file FILE or $K1M_TOKEN"},
		// The file may be gone: the server deleted it once it had joined.
		{[]string{"--server", "https://[fddf:4035:b520::1:1]:6443", "--token-file", "/etc/k1m/server-join-token"}, ""},
		{[]string{"--server", "https://[fddf:4035:b520::1:1]:6443", "--token", token, "--token-file", "/etc/k1m/server-join-token"},
			"--token and --token-file are both given: give one"},
		{[]string{"--token-file", "/etc/k1m/server-join-token"},
			"--token-file needs --server: it holds the cluster's server token a joining server joins with (a lone or first server makes its own tokens; --token sets its join token's secret)"},
		{[]string{"--server", "https://[fddf:4035:b520::1:1]:6443", "--token", "abcdef.0123456789abcdef"},
			"--token is not of the form K1M<64 hex digits>::<token id>.<token secret> (the server prints it and keeps it in DATA-DIR/token), or a server token, the same followed by ::<seal> (DATA-DIR/server-token) (with --server, --token is a server's DATA-DIR/server-token)"},
	} {
		s, err := parse(t, "", c.args...)
		if err != nil {
			t.Fatal(err)
		}
		err = s.validateJoin()
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || err.Error() != c.want)) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func TestJoinTokenFromEnvironment(t *testing.T) {
	const token = "K1M" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
	t.Setenv(TokenEnv, token)
	s, err := parse(t, "", "--server", "https://[fddf:4035:b520::1:1]:6443", "--data-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Complete()
	if err != nil {
		t.Fatal(err)
	}
	if c.JoinToken.Secret != "abcdef.0123456789abcdef" || c.JoinToken.CAHash != "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("JoinToken %+v, want the one of $K1M_TOKEN", c.JoinToken)
	}
	// Taken out of the environment: no child inherits it; a start again
	// of the process (an exec) gets it back.
	if v, ok := os.LookupEnv(TokenEnv); ok {
		t.Errorf("$K1M_TOKEN still set after completion: %q", v)
	}
	if got := c.RestartEnv(); !reflect.DeepEqual(got, []string{"K1M_TOKEN=" + token}) {
		t.Errorf("RestartEnv %q, want the token of $K1M_TOKEN", got)
	}
	t.Setenv(TokenEnv, token)
	// Without --server the variable is an agent's: a lone server ignores it.
	lone, _ := parse(t, "", "--data-dir", t.TempDir())
	if c, err := lone.Complete(); err != nil || c.Token != "" || c.RestartEnv() != nil {
		t.Errorf("a lone server took $K1M_TOKEN: %v, %q", err, c.Token)
	}
	if v, ok := os.LookupEnv(TokenEnv); ok {
		t.Errorf("$K1M_TOKEN still set after a lone server's completion: %q", v)
	}
}

// The flags named "ephemeral" before the no-fsync rename still work, from
// the command line and the file, and set the same settings.
func TestRenamedFlagsStillWork(t *testing.T) {
	s, err := parse(t, "ephemeral-datastore-endpoint: https://[fddf:4035:b520::7]:2379\n",
		"--ephemeral-data-dir=/run/k1m-nofsync", "--ephemeral-etcd-port=2479")
	if err != nil {
		t.Fatal(err)
	}
	got := [3]any{s.NoFsyncDataDir, s.NoFsyncEtcdPort, s.Datastore.NoFsyncEndpoint}
	if want := [3]any{"/run/k1m-nofsync", 2479, "https://[fddf:4035:b520::7]:2379"}; got != want {
		t.Errorf("old flag names set %v, want %v", got, want)
	}
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	d := DefaultServer()
	d.AddFlags(fs)
	for old, current := range RenamedFlags {
		f := fs.Lookup(old)
		if f == nil || f.Deprecated != "use --"+current || !f.Hidden {
			t.Errorf("--%s: %+v, want a hidden alias deprecated for --%s", old, f, current)
		}
	}
}

// An old and a current name are one setting: the command line wins over
// the file whichever name each uses, and the file may not give both.
func TestRenamedFlagsAreOneSetting(t *testing.T) {
	s, err := parse(t, "no-fsync-data-dir: /from/file\n", "--ephemeral-data-dir=/from/flag")
	if err != nil {
		t.Fatal(err)
	}
	if s.NoFsyncDataDir != "/from/flag" {
		t.Errorf("--ephemeral-data-dir on the command line, no-fsync-data-dir in the file: %q, want the command line's", s.NoFsyncDataDir)
	}
	_, err = parse(t, "no-fsync-data-dir: /a\nephemeral-data-dir: /b\n")
	if err == nil || !strings.Contains(err.Error(), "key no-fsync-data-dir is given twice (lines 1 and 2)") {
		t.Errorf("both names in the file: %v", err)
	}
}

// --etcd-partitions resolves to the partitions in their table's order,
// each with its quota; their ports count with every other listener's.
func TestPartitionsComplete(t *testing.T) {
	s, err := parse(t, "", "--etcd-partitions=nodes,pods", "--etcd-quota-backend-bytes=17179869184")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Complete()
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := constants.StorePartitionNamed("pods")
	nodes, _ := constants.StorePartitionNamed("nodes")
	if want := []constants.StorePartition{pods, nodes}; !reflect.DeepEqual(c.Partitions, want) || c.PartitionQuotaBytes != 17179869184 {
		t.Errorf("Partitions %+v, quota %d; want %+v with --etcd-quota-backend-bytes's", c.Partitions, c.PartitionQuotaBytes, want)
	}
	s, err = parse(t, "", "--etcd-partitions=pods", "--no-fsync-etcd-port=2383")
	if err != nil {
		t.Fatal(err)
	}
	want := "--no-fsync-etcd-port and the pods partition's etcd (--etcd-port+4) use the same port 2383: every listener needs its own (each etcd also takes the port after its own)\n" +
		"--no-fsync-etcd-port (peer, +1) and the pods partition's etcd (peer, --etcd-port+5) use the same port 2384: every listener needs its own (each etcd also takes the port after its own)"
	if err := s.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}

// --no-fsync-quota-backend-bytes sizes the embedded no-fsync etcd only.
func TestNoFsyncQuota(t *testing.T) {
	s, err := parse(t, "", "--no-fsync-quota-backend-bytes=17179869184")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.requireNoFsyncQuota(); err != nil {
		t.Errorf("16 GiB: %v", err)
	}
	c, err := s.Complete()
	if err != nil || c.NoFsyncQuotaBytes != 17179869184 {
		t.Errorf("Complete: NoFsyncQuotaBytes %d, %v; want 17179869184", c.NoFsyncQuotaBytes, err)
	}
	s.Datastore.NoFsyncEndpoint = "https://[fd00::9]:2379"
	want := "--no-fsync-quota-backend-bytes 17179869184 with --no-fsync-datastore-endpoint: the external etcd's quota is its own (its --quota-backend-bytes)"
	if err := s.requireNoFsyncQuota(); err == nil || err.Error() != want {
		t.Errorf("with an external no-fsync etcd: %v, want %q", err, want)
	}
}
