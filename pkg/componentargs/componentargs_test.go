package componentargs

import (
	"slices"
	"strings"
	"testing"
)

func TestParseAcceptsNameValue(t *testing.T) {
	got, err := APIServer.Parse([]string{"max-requests-inflight=800", "--audit-log-maxage=7", "feature-gates=BtreeWatchCache=false,WatchList=true", "profiling=true", "runtime-config=", "enable-admission-plugins=NodeRestriction,PodNodeSelector"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Arg{{"max-requests-inflight", "800"}, {"audit-log-maxage", "7"}, {"feature-gates", "BtreeWatchCache=false,WatchList=true"}, {"profiling", "true"}, {"runtime-config", ""}, {"enable-admission-plugins", "NodeRestriction,PodNodeSelector"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestParseRefusesWithNamedErrors(t *testing.T) {
	cases := []struct {
		c     Component
		value string
		want  string
	}{
		{APIServer, "etcd-servers=https://[::1]:9999", `--kube-apiserver-arg "etcd-servers=https://[::1]:9999" collides with --etcd-servers, which k1m sets for kube-apiserver itself: k1m runs the durable etcd`},
		{APIServer, "--service-cluster-ip-range=fd00::/108", `--kube-apiserver-arg "--service-cluster-ip-range=fd00::/108" collides with --service-cluster-ip-range, which k1m sets for kube-apiserver itself: use --service-cidr`},
		{APIServer, "feature-gates=WatchList=true,BtreeWatchCache=true", `--kube-apiserver-arg "feature-gates=WatchList=true,BtreeWatchCache=true": collides with --feature-gates=BtreeWatchCache=false, which k1m's patch 0001 locks (the watch cache is the hashmap store)`},
		{APIServer, "enable-admission-plugins=PodNodeSelector", `--kube-apiserver-arg "enable-admission-plugins=PodNodeSelector": drops NodeRestriction, which k1m always enables (it keeps a node's credentials to its own Node, Pods and Lease): list it too, e.g. --kube-apiserver-arg=enable-admission-plugins=NodeRestriction,PodNodeSelector`},
		{APIServer, "disable-admission-plugins=PodSecurity, NodeRestriction", `--kube-apiserver-arg "disable-admission-plugins=PodSecurity, NodeRestriction": disables NodeRestriction, which k1m always enables (it keeps a node's credentials to its own Node, Pods and Lease)`},
		{APIServer, "profiling", `--kube-apiserver-arg "profiling": want ` + Form},
		{APIServer, "=true", `--kube-apiserver-arg "=true": want ` + Form},
		{APIServer, "Max_Requests=1", `--kube-apiserver-arg "Max_Requests=1": want ` + Form},
		{ControllerManager, "node-monitor-grace-period=1m", `--kube-controller-manager-arg "node-monitor-grace-period=1m" collides with --node-monitor-grace-period, which k1m sets for kube-controller-manager itself: use --node-lease-renew-interval (the grace period follows it)`},
		{Scheduler, "kubeconfig=/x", `--kube-scheduler-arg "kubeconfig=/x" collides with --kubeconfig, which k1m sets for kube-scheduler itself: k1m writes the scheduler's kubeconfig`},
		{Kubelet, "hostname-override=x", `--kubelet-arg "hostname-override=x" collides with --hostname-override, which k1m sets for kubelet itself: use --node-name`},
		{KubeProxy, "proxy-mode=ipvs", `--kube-proxy-arg "proxy-mode=ipvs" collides with --proxy-mode, which k1m sets for kube-proxy itself: use --proxy-mode`},
	}
	for _, c := range cases {
		_, err := c.c.Parse([]string{c.value})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %q:\n got %v\nwant %s", c.c.Flag, c.value, err, c.want)
		}
	}
	// Every problem at once, and nothing half-accepted.
	got, err := Kubelet.Parse([]string{"v=2", "cert-dir=/x", "bad"})
	if got != nil || err == nil || len(strings.Split(err.Error(), "\n")) != 2 {
		t.Errorf("two bad values: got %v, %v", got, err)
	}
}

func TestMergeReplacesInPlaceOrAdds(t *testing.T) {
	base := []string{"--bind-address=::", "--profiling=false", "--enable-admission-plugins=NodeRestriction", "--v=0"}
	got := Merge(base, []Arg{{"profiling", "true"}, {"max-requests-inflight", "800"}, {"enable-admission-plugins", "NodeRestriction,AlwaysPullImages"}, {"v", "2"}, {"v", "3"}})
	want := []string{"--bind-address=::", "--profiling=true", "--enable-admission-plugins=NodeRestriction,AlwaysPullImages", "--v=2", "--max-requests-inflight=800", "--v=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if base[1] != "--profiling=false" {
		t.Error("Merge changed its input")
	}
	if got := Merge(base, nil); !slices.Equal(got, base) {
		t.Errorf("no pass-through changed the arguments: %q", got)
	}
}

// Every owned flag of kube-apiserver that k1m's own flags replace names
// the k1m flag: a user who hits the refusal knows where to go.
func TestOwnedFlagsSayWhatToUse(t *testing.T) {
	for _, c := range []Component{APIServer, ControllerManager, Scheduler, Kubelet, KubeProxy} {
		for name, why := range c.owned {
			if why == "" || !flagName.MatchString(name) {
				t.Errorf("%s: owned %q has no reason or is not a flag name", c.Name, name)
			}
		}
	}
}
