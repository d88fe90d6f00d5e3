package server

import (
	"testing"
	"time"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/join"
)

func TestCheckClusterSettingsNamesEveryFlagThatDiffers(t *testing.T) {
	flags := config.DefaultServer()
	flags.DataDir = t.TempDir()
	cfg, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	same := join.Settings{RenewInterval: cfg.Lease.RenewInterval, ClusterDomain: cfg.ClusterDomain, ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: cfg.ServiceCIDR}
	if err := checkClusterSettings(cfg, same, false); err != nil {
		t.Errorf("the same settings: %v", err)
	}
	other := join.Settings{RenewInterval: 5 * time.Second, ClusterDomain: "k1m.example", ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: "fddf:4035:b511::/108"}
	err = checkClusterSettings(cfg, other, true)
	want := "--node-lease-renew-interval 10s differs from the cluster's 5s: every server of a cluster has the same; start this one with --node-lease-renew-interval=5s\n" +
		"--cluster-domain cluster.local differs from the cluster's k1m.example: every server of a cluster has the same; start this one with --cluster-domain=k1m.example\n" +
		"--service-cidr fddf:4035:b510::/108 differs from the cluster's fddf:4035:b511::/108: every server of a cluster has the same; start this one with --service-cidr=fddf:4035:b511::/108\n" +
		"--secrets-encryption false differs from the cluster's true: every server of a cluster has the same; start this one with --secrets-encryption=true"
	if err == nil || err.Error() != want {
		t.Errorf("differing settings:\n%v\nwant\n%s", err, want)
	}
}
