package multicall

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	cases := []struct {
		argv     []string
		wantName string
		wantArgs string
		wantOK   bool
	}{
		{[]string{"/usr/local/bin/k1m", "kubelet", "--v=2"}, "kubelet", "--v=2", true},
		{[]string{"/usr/local/bin/kubectl", "get", "nodes"}, "kubectl", "get nodes", true},
		{[]string{"k1m", "version"}, "", "", false},
		{[]string{"k1m"}, "", "", false},
		{nil, "", "", false},
	}
	for _, tc := range cases {
		name, args, ok := Lookup(tc.argv)
		if name != tc.wantName || strings.Join(args, " ") != tc.wantArgs || ok != tc.wantOK {
			t.Errorf("Lookup(%q) = %q %q %v; want %q %q %v", tc.argv, name, args, ok, tc.wantName, tc.wantArgs, tc.wantOK)
		}
	}
}

func TestNamesListsEveryComponent(t *testing.T) {
	got := strings.Join(Names(), ",")
	want := "kube-apiserver,kube-controller-manager,kube-proxy,kube-scheduler,kubectl,kubelet"
	if got != want {
		t.Errorf("Names() = %s, want %s", got, want)
	}
}
