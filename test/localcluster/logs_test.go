package localcluster

import (
	"os"
	"reflect"
	"testing"
)

func TestServersLogging(t *testing.T) {
	o := base(3, 3)
	o.ClusterDir = t.TempDir()
	c := newCluster(t, o)
	logs := map[int]string{
		1: "I1127 leaderelection.go:271] successfully acquired lease kube-system/kube-controller-manager\n",
		2: `I1127 event.go:389] "Event occurred" reason="LeaderElection" message="vm_b became leader"` + "\n",
		3: `I1127 event.go:389] "Event occurred" reason="LeaderElection" message="vm_a became leader"` + "\n",
	}
	for i, text := range logs {
		if err := os.WriteFile(c.Server(i).LogFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for text, want := range map[string][]int{
		`message="vm_a became leader"`: {3},
		"became leader":                {2, 3},
		"nobody logs this":             nil,
	} {
		got, err := c.ServersLogging(text)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ServersLogging(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	if err := os.Remove(c.Server(2).LogFile); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ServersLogging("became leader"); err == nil {
		t.Errorf("ServersLogging with server 2's log missing = %v, want an error", got)
	}
}
