package cleanup

import "testing"

func TestReleased(t *testing.T) {
	dirs, names := []string{"/var/lib/k1m", "/run/k1m/"}, []string{"/run/netns/cni-"}
	for mp, want := range map[string]bool{
		"/var/lib/k1m":                          true,
		"/var/lib/k1m/agent/kubelet/pods/x/vol": true,
		"/run/k1m":                              true,
		"/run/k1m/node-1/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs": true,
		"/run/netns/cni-1234-5678": true,
		"/run/k1m-nofsync":         false, // an operator's tmpfs beside it
		"/var/lib/k1m-backup":      false,
		"/run/netns/k1m-node-1":    false,
		"/":                        false,
	} {
		if got := released(mp, dirs, names); got != want {
			t.Errorf("released(%s) = %v, want %v", mp, got, want)
		}
	}
}
