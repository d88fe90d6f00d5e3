package agent

import (
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/join"
)

func TestKubeletConfigCarriesTheServersLeaseProfile(t *testing.T) {
	s := join.Settings{RenewInterval: 30 * time.Second, LeaseDurationSeconds: 120, ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a"}
	out := kubeletConfig(paths{data: "/d"}, s, "/k1m/n1", "unix:///run/c.sock", "/d/pod-logs")
	for _, want := range []string{"nodeLeaseRenewInterval: 30s", "nodeLeaseDurationSeconds: 120", `clusterDNS: ["fddf:4035:b510::a"]`,
		"cgroupDriver: cgroupfs", `cgroupRoot: "/k1m/n1"`, `podLogsDir: "/d/pod-logs"`, "anonymous: {enabled: false}", "authorization: {mode: Webhook}"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubelet config lacks %q:\n%s", want, out)
		}
	}
}
