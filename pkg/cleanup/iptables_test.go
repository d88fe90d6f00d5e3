package cleanup

import (
	"reflect"
	"testing"
)

func TestKubeChainCleanup(t *testing.T) {
	save := `*filter
:INPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
-A INPUT -j KUBE-FIREWALL
-A INPUT -s fd00::/64 -j ACCEPT
-A KUBE-FIREWALL ! -s ::1/128 -m comment --comment "block incoming localnet connections" -j DROP
COMMIT
`
	got := kubeChainCleanup(save)
	want := [][]string{
		{"-t", "filter", "-D", "INPUT", "-j", "KUBE-FIREWALL"},
		{"-t", "filter", "-F", "KUBE-FIREWALL"},
		{"-t", "filter", "-F", "KUBE-KUBELET-CANARY"},
		{"-t", "filter", "-X", "KUBE-FIREWALL"},
		{"-t", "filter", "-X", "KUBE-KUBELET-CANARY"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if args := splitRule(`KUBE-X -m comment --comment "a b" -j DROP`); len(args) != 7 || args[4] != "a b" || args[5] != "-j" {
		t.Fatalf("splitRule: %q", args)
	}
}
