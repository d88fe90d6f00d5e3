package server

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/etcd"
	"k1m.dev/k1m/pkg/flavor"
	"k1m.dev/k1m/pkg/pki"
)

func TestEtcdOverridesPutEventsAndLeasesInTheNoFsyncEtcd(t *testing.T) {
	got := etcdOverrides(tlsStores(etcd.Member{Host: "::1", Port: 2379}, etcd.Member{Host: "::1", Port: 2381}))
	want := "/events#https://[::1]:2381,coordination.k8s.io/leases#https://[::1]:2381"
	if got != want {
		t.Fatalf("etcdOverrides = %q, want %q", got, want)
	}
	// An API-server-only server reaches every member of the cluster.
	remote := etcdStores{durable: []string{"https://[fddf:4035:b520::1:1]:2379", "https://[fddf:4035:b520::1:2]:2379"},
		noFsync: []string{"https://[fddf:4035:b520::1:1]:2381", "https://[fddf:4035:b520::1:2]:2381"}, tls: testStoreTLS}
	want = "/events#https://[fddf:4035:b520::1:1]:2381;https://[fddf:4035:b520::1:2]:2381," +
		"coordination.k8s.io/leases#https://[fddf:4035:b520::1:1]:2381;https://[fddf:4035:b520::1:2]:2381"
	if got := etcdOverrides(remote); got != want {
		t.Errorf("etcdOverrides of several members = %q, want %q", got, want)
	}
	args := apiserverArgs(config.DefaultServer(), "fddf:4035:b520::1:4", testCerts(), remote, apiserverOptions{})
	if !slices.Contains(args, "--etcd-servers=https://[fddf:4035:b520::1:1]:2379,https://[fddf:4035:b520::1:2]:2379") {
		t.Errorf("--etcd-servers of several members missing from %v", args)
	}
}

// localStores are a server's own members, reached with the etcd CA's
// client certificate.
func tlsStores(durable, noFsync etcd.Member) etcdStores {
	return etcdStores{durable: []string{durable.ClientURL()}, noFsync: []string{noFsync.ClientURL()}, tls: testStoreTLS}
}

var testStoreTLS = etcd.TLS{CertFile: "/t/apiserver-etcd-client.crt", KeyFile: "/t/apiserver-etcd-client.key", CAFile: "/t/etcd-ca.crt"}

// testCerts names every file after its role, so that an argument pointing
// at the wrong file shows.
func testCerts() *certs {
	ca := func(name string) authority {
		return authority{Authority: &pki.Authority{}, cert: "/t/" + name + ".crt", key: "/t/" + name + ".key"}
	}
	p := func(name string) pair { return pair{"/t/" + name + ".crt", "/t/" + name + ".key"} }
	return &certs{dir: "/t", cluster: ca("ca"), etcd: ca("etcd-ca"), frontProxy: ca("front-proxy-ca"), kubeletServing: ca("kubelet-serving-ca"),
		apiserver: p("apiserver"), kubeletClient: p("apiserver-kubelet-client"), admin: p("admin"),
		controllerManager: p("controller-manager"), scheduler: p("scheduler"),
		etcdServer: p("etcd-server"), etcdClient: p("apiserver-etcd-client"), frontProxyClient: p("front-proxy-client"),
		saKey: "/t/service-account.key", saPub: "/t/service-account.key.pub"}
}

func equalArgs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

var wantAPIServer = []string{
	"--advertise-address=fddf:4035:b520::1",
	"--bind-address=::",
	"--secure-port=6443",
	"--etcd-servers=https://[::1]:2379",
	"--etcd-servers-overrides=/events#https://[::1]:2381,coordination.k8s.io/leases#https://[::1]:2381",
	"--etcd-cafile=/t/etcd-ca.crt",
	"--etcd-certfile=/t/apiserver-etcd-client.crt",
	"--etcd-keyfile=/t/apiserver-etcd-client.key",
	"--client-ca-file=/t/ca.crt",
	"--tls-cert-file=/t/apiserver.crt",
	"--tls-private-key-file=/t/apiserver.key",
	"--kubelet-client-certificate=/t/apiserver-kubelet-client.crt",
	"--kubelet-client-key=/t/apiserver-kubelet-client.key",
	"--kubelet-certificate-authority=/t/kubelet-serving-ca.crt",
	"--kubelet-preferred-address-types=InternalIP,Hostname",
	"--requestheader-client-ca-file=/t/front-proxy-ca.crt",
	"--requestheader-allowed-names=front-proxy-client",
	"--requestheader-username-headers=X-Remote-User",
	"--requestheader-group-headers=X-Remote-Group",
	"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	"--proxy-client-cert-file=/t/front-proxy-client.crt",
	"--proxy-client-key-file=/t/front-proxy-client.key",
	"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
	"--service-account-key-file=/t/service-account.key.pub",
	"--service-account-signing-key-file=/t/service-account.key",
	"--service-cluster-ip-range=fddf:4035:b510::/108",
	"--authorization-mode=Node,RBAC",
	"--enable-admission-plugins=NodeRestriction",
	"--enable-bootstrap-token-auth=true",
	"--allow-privileged=true",
	"--profiling=false",
	"--shutdown-send-retry-after=true",
	"--shutdown-delay-duration=3s",
}

func TestAPIServerArgs(t *testing.T) {
	cfg := config.DefaultServer()
	durable, noFsync := etcd.Member{Host: "::1", Port: 2379}, etcd.Member{Host: "::1", Port: 2381}
	equalArgs(t, "defaults", apiserverArgs(cfg, "fddf:4035:b520::1", testCerts(), tlsStores(durable, noFsync), apiserverOptions{}), wantAPIServer)

	opts := apiserverOptions{
		encryptionConfig: "/t/encryption-config.yaml",
		audit:            config.Audit{PolicyFile: "/p.yaml", LogPath: "/var/log/audit.log", MaxAge: 30, MaxBackup: 10, MaxSize: 100},
		extra:            []componentargs.Arg{{Name: "profiling", Value: "true"}, {Name: "max-requests-inflight", Value: "800"}},
	}
	want := slices.Clone(wantAPIServer)
	want[slices.Index(want, "--profiling=false")] = "--profiling=true"
	want = append(want, "--encryption-provider-config=/t/encryption-config.yaml",
		"--audit-policy-file=/p.yaml", "--audit-log-path=/var/log/audit.log", "--audit-log-maxage=30", "--audit-log-maxbackup=10", "--audit-log-maxsize=100",
		"--max-requests-inflight=800")
	equalArgs(t, "encryption, audit, pass-through", apiserverArgs(cfg, "fddf:4035:b520::1", testCerts(), tlsStores(durable, noFsync), opts), want)
}

// The stock build has one store (flavor.SeparateNoFsyncStore): no overrides, as
// kubeadm deploys kube-apiserver.
func TestAPIServerArgsOfOneStore(t *testing.T) {
	stores := tlsStores(etcd.Member{Host: "::1", Port: 2379}, etcd.Member{})
	stores.noFsync = nil
	want := slices.DeleteFunc(slices.Clone(wantAPIServer), func(a string) bool {
		return a == "--etcd-servers-overrides=/events#https://[::1]:2381,coordination.k8s.io/leases#https://[::1]:2381"
	})
	if len(want) != len(wantAPIServer)-1 {
		t.Fatal("wantAPIServer has no --etcd-servers-overrides")
	}
	equalArgs(t, "one store", apiserverArgs(config.DefaultServer(), "fddf:4035:b520::1", testCerts(), stores, apiserverOptions{}), want)
}

// A server's own members serve its kube-apiserver on local sockets,
// without TLS: no etcd TLS flags.
func TestAPIServerArgsOverLocalSockets(t *testing.T) {
	durable := &etcd.Member{Host: "::1", Port: 2379, LocalSocket: "/d/etcd-sockets/durable.sock"}
	noFsync := &etcd.Member{Host: "::1", Port: 2381, LocalSocket: "/d/etcd-sockets/no-fsync.sock"}
	stores, ok := socketStores(durable, noFsync, nil)
	if !ok {
		t.Fatal("two members with sockets: not reached over them")
	}
	want := slices.Concat(wantAPIServer[:3], []string{
		"--etcd-servers=unix:///d/etcd-sockets/durable.sock",
		"--etcd-servers-overrides=/events#unix:///d/etcd-sockets/no-fsync.sock,coordination.k8s.io/leases#unix:///d/etcd-sockets/no-fsync.sock",
	}, wantAPIServer[8:])
	equalArgs(t, "local sockets", apiserverArgs(config.DefaultServer(), "fddf:4035:b520::1", testCerts(), stores, apiserverOptions{}), want)

	// The stock build's one store.
	stores, ok = socketStores(durable, nil, nil)
	if wantStores := (etcdStores{durable: []string{"unix:///d/etcd-sockets/durable.sock"}}); !ok || !reflect.DeepEqual(stores, wantStores) {
		t.Errorf("one store: %+v %v, want %+v", stores, ok, wantStores)
	}
	// A member without a socket (a data directory too deep, an external
	// etcd): TLS for every store, kube-apiserver having one TLS setting.
	for name, ms := range map[string][2]*etcd.Member{
		"no-fsync without a socket": {durable, {Host: "::1", Port: 2381}},
		"durable without a socket":  {{Host: "::1", Port: 2379}, noFsync},
		"external durable":          {nil, noFsync},
	} {
		if _, ok := socketStores(ms[0], ms[1], nil); ok {
			t.Errorf("%s: reached over sockets", name)
		}
	}
}

func TestLocalSocketOnlyWithEveryStoreEmbedded(t *testing.T) {
	s := &Server{cfg: &config.CompletedServer{Server: config.DefaultServer()}}
	dataDir := t.TempDir()
	s.cfg.DataDir = dataDir
	if !flavor.LocalEtcdSockets { // the stock build: kube-apiserver over TLS, as kubeadm's
		if got := s.localSocket("durable"); got != "" {
			t.Errorf("stock build: localSocket = %q, want none", got)
		}
		return
	}
	if got, want := s.localSocket("durable"), dataDir+"/etcd-sockets/durable.sock"; got != want {
		t.Errorf("localSocket = %q, want %q", got, want)
	}
	s.cfg.DataDir = "/" + strings.Repeat("d", etcd.MaxSocketPath-len("/etcd-sockets/no-fsync.sock"))
	for _, store := range []string{"durable", "no-fsync"} { // both or neither
		if got := s.localSocket(store); got != "" {
			t.Errorf("a no-fsync socket path of 108 bytes: %s %q, want none", store, got)
		}
	}
	want := "a unix socket under --data-dir " + s.cfg.DataDir + " would be 108 bytes long, over the 107 a socket path takes"
	if _, err := s.socketDir(); err == nil || err.Error() != want {
		t.Errorf("socketDir: %v, want %q", err, want)
	}
	s.cfg.DataDir = "/var/lib/k1m,a;b"
	want = "--data-dir /var/lib/k1m,a;b has a ',' or ';', which kube-apiserver's --etcd-servers flags split on"
	if _, err := s.socketDir(); err == nil || err.Error() != want {
		t.Errorf("socketDir: %v, want %q", err, want)
	}
	s.cfg.DataDir = dataDir
	s.cfg.Datastore.NoFsyncEndpoint = "https://etcd.example:2379"
	if got := s.localSocket("durable"); got != "" {
		t.Errorf("with an external store: %q, want none", got)
	}
}

func TestControllerArgs(t *testing.T) {
	lease, err := config.LeaseProfileFor(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	local := []string{"--kubeconfig=/k", "--authentication-kubeconfig=/k", "--authorization-kubeconfig=/k",
		"--bind-address=::1", "--leader-elect=false", "--profiling=false"}
	equalArgs(t, "kube-controller-manager", controllerManagerArgs(config.DefaultServer(), lease, "/k", testCerts(), false), append(slices.Clone(local),
		"--allocate-node-cidrs=true",
		"--cluster-cidr="+config.DefaultClusterCIDR,
		"--node-cidr-mask-size-ipv6=64",
		"--service-cluster-ip-range=fddf:4035:b510::/108",
		"--cluster-signing-kubelet-serving-cert-file=/t/kubelet-serving-ca.crt",
		"--cluster-signing-kubelet-serving-key-file=/t/kubelet-serving-ca.key",
		"--cluster-signing-kubelet-client-cert-file=/t/ca.crt",
		"--cluster-signing-kubelet-client-key-file=/t/ca.key",
		"--cluster-signing-kube-apiserver-client-cert-file=/t/ca.crt",
		"--cluster-signing-kube-apiserver-client-key-file=/t/ca.key",
		"--root-ca-file=/t/ca.crt",
		"--service-account-private-key-file=/t/service-account.key",
		"--use-service-account-credentials=true",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--node-monitor-grace-period=2m30s",
		"--node-lease-duration=2m0s",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	))
	// The scheduler's kubeconfig, rate and profiling are in its file
	// (pkg/schedulerconfig): beside one it ignores those flags.
	sched := []string{"--config=/c.yaml", "--authentication-kubeconfig=/k", "--authorization-kubeconfig=/k", "--bind-address=::1", "--leader-elect=false"}
	equalArgs(t, "kube-scheduler", schedulerArgs("/c.yaml", "/k", false), sched)
	// One of several servers: exactly one active of each, by leader election.
	sched[4] = "--leader-elect=true"
	equalArgs(t, "kube-scheduler of one of several servers", schedulerArgs("/c.yaml", "/k", true), sched)
	elected := slices.Clone(local)
	elected[4] = "--leader-elect=true"
	equalArgs(t, "kube-controller-manager of one of several servers", controllerManagerArgs(config.DefaultServer(), lease, "/k", testCerts(), true)[:len(local)], elected)
}

// Each partition's resource goes to its members, after the no-fsync
// resources.
func TestEtcdOverridesWithPartitions(t *testing.T) {
	pods, _ := constants.StorePartitionNamed("pods")
	slices, _ := constants.StorePartitionNamed("endpointslices")
	stores := etcdStores{durable: []string{"https://[::1]:2379"}, noFsync: []string{"https://[::1]:2381"},
		partitions: []partitionStore{{pods, []string{"https://[fddf::1]:2383", "https://[fddf::2]:2383"}}, {slices, []string{"https://[::1]:2387"}}}}
	want := "/events#https://[::1]:2381,coordination.k8s.io/leases#https://[::1]:2381," +
		"/pods#https://[fddf::1]:2383;https://[fddf::2]:2383,discovery.k8s.io/endpointslices#https://[::1]:2387"
	if got := etcdOverrides(stores); got != want {
		t.Errorf("etcdOverrides = %q, want %q", got, want)
	}
}
