package server

import (
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/etcd"
)

func TestEtcdOverridesPutEventsAndLeasesInTheEphemeralEtcd(t *testing.T) {
	got := etcdOverrides(etcd.Member{Host: "::1", Port: 2381})
	want := "/events#https://[::1]:2381,coordination.k8s.io/leases#https://[::1]:2381"
	if got != want {
		t.Fatalf("etcdOverrides = %q, want %q", got, want)
	}
}

func TestControllerManagerFollowsTheLeaseProfile(t *testing.T) {
	lease, err := config.LeaseProfileFor(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(controllerManagerArgs(config.DefaultServer(), lease, "/k", &certs{}), " ")
	for _, want := range []string{"--node-lease-duration=2m0s", "--node-monitor-grace-period=2m30s", "--cluster-cidr=fddf:4035:b500::/44", "--node-cidr-mask-size-ipv6=64", "--leader-elect=false"} {
		if !strings.Contains(args, want) {
			t.Errorf("controller-manager args lack %s: %s", want, args)
		}
	}
}

func TestAPIServerArgs(t *testing.T) {
	cfg := config.DefaultServer()
	args := strings.Join(apiserverArgs(cfg, "fddf:4035:b520::1", &certs{}, etcd.Member{Host: "::1", Port: 2379}, etcd.Member{Host: "::1", Port: 2381}, apiserverOptions{}), " ")
	for _, want := range []string{"--etcd-servers=https://[::1]:2379", "--etcd-servers-overrides=/events#https://[::1]:2381", "--service-cluster-ip-range=fddf:4035:b510::/108",
		"--authorization-mode=Node,RBAC", "--enable-bootstrap-token-auth=true", "--advertise-address=fddf:4035:b520::1", "--bind-address=::"} {
		if !strings.Contains(args, want) {
			t.Errorf("kube-apiserver args lack %s", want)
		}
	}
}
