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
		{APIServer, "disable-admission-plugins=ValidatingAdmissionPolicy", `--kube-apiserver-arg "disable-admission-plugins=ValidatingAdmissionPolicy": disables ValidatingAdmissionPolicy, which k1m relies on (its policy k1m-node-pod-ranges keeps nodes from writing their own pod ranges, which every node routes)`},
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

// No pass-through flag weakens how kube-apiserver or a kubelet
// authenticates and authorizes a request: each such value is refused with
// the flag, the value, why, and the valid form.
func TestParseRefusesWeakerAuth(t *testing.T) {
	const (
		authorizers        = "Node keeps a node's credentials to its own Node, Lease and what its own pods use; RBAC gives everyone else what their roles grant"
		anonymous          = "k1m's kubelets refuse anonymous requests (their API reaches every pod's logs and exec): the only valid form is --kubelet-arg=anonymous-auth=false"
		webhook            = "k1m's kubelets ask kube-apiserver to authorize each request (Webhook), never authorize every one (AlwaysAllow): the only valid form is --kubelet-arg=authorization-mode=Webhook"
		readOnly           = "k1m's kubelets keep the read-only port closed (it serves pods and node status with no authentication or authorization): the only valid form is --kubelet-arg=read-only-port=0"
		apiserverAnonymous = "k1m keeps kube-apiserver's default, true: the join reads the cluster CA (kube-public/cluster-info, whose hash the token pins) anonymously, as kubeadm's does, " +
			"and RBAC grants anonymous requests only that and /healthz, /livez, /readyz and /version; leave --anonymous-auth out"
	)
	cases := []struct {
		c     Component
		value string
		want  string
	}{
		{APIServer, "authorization-mode=AlwaysAllow",
			`--kube-apiserver-arg "authorization-mode=AlwaysAllow": AlwaysAllow authorizes every request, anonymous ones included: k1m always authorizes with Node and RBAC (` + authorizers + `); list other authorizers beside those two, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC`},
		{APIServer, "authorization-mode=Node,RBAC,AlwaysAllow",
			`--kube-apiserver-arg "authorization-mode=Node,RBAC,AlwaysAllow": AlwaysAllow authorizes every request, anonymous ones included: k1m always authorizes with Node and RBAC (` + authorizers + `); list other authorizers beside those two, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC`},
		{APIServer, "authorization-mode=RBAC",
			`--kube-apiserver-arg "authorization-mode=RBAC": drops Node, which k1m always authorizes with (` + authorizers + `): list both, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC`},
		{APIServer, "authorization-mode=Node,Webhook",
			`--kube-apiserver-arg "authorization-mode=Node,Webhook": drops RBAC, which k1m always authorizes with (` + authorizers + `): list both, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC,Webhook`},
		{APIServer, "authorization-mode=Webhook",
			`--kube-apiserver-arg "authorization-mode=Webhook": drops Node and RBAC, which k1m always authorizes with (` + authorizers + `): list both, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC,Webhook`},
		{APIServer, "authorization-mode=",
			`--kube-apiserver-arg "authorization-mode=": drops Node and RBAC, which k1m always authorizes with (` + authorizers + `): list both, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC`},
		{APIServer, "authorization-config=/etc/k1m/authz.yaml",
			`--kube-apiserver-arg "authorization-config=/etc/k1m/authz.yaml": a structured authorization file replaces --authorization-mode, so it could drop Node or RBAC, which k1m always authorizes with (` + authorizers + `): ` +
				`add an authorizer to the mode list instead, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC,Webhook with --kube-apiserver-arg=authorization-webhook-config-file=FILE`},
		{APIServer, "anonymous-auth=true", `--kube-apiserver-arg "anonymous-auth=true": ` + apiserverAnonymous},
		{APIServer, "anonymous-auth=false", `--kube-apiserver-arg "anonymous-auth=false": ` + apiserverAnonymous},
		{Kubelet, "anonymous-auth=true", `--kubelet-arg "anonymous-auth=true": ` + anonymous},
		{Kubelet, "anonymous-auth=T", `--kubelet-arg "anonymous-auth=T": ` + anonymous},
		{Kubelet, "anonymous-auth=1", `--kubelet-arg "anonymous-auth=1": ` + anonymous},
		{Kubelet, "anonymous-auth=yes", `--kubelet-arg "anonymous-auth=yes": "yes" is not a boolean; ` + anonymous},
		{Kubelet, "anonymous-auth=", `--kubelet-arg "anonymous-auth=": "" is not a boolean; ` + anonymous},
		{Kubelet, "authorization-mode=AlwaysAllow", `--kubelet-arg "authorization-mode=AlwaysAllow": ` + webhook},
		{Kubelet, "authorization-mode=webhook", `--kubelet-arg "authorization-mode=webhook": ` + webhook},
		{Kubelet, "read-only-port=10255", `--kubelet-arg "read-only-port=10255": ` + readOnly},
		{Kubelet, "read-only-port=0x280f", `--kubelet-arg "read-only-port=0x280f": ` + readOnly},
		{Kubelet, "read-only-port=none", `--kubelet-arg "read-only-port=none": "none" is not a port number; ` + readOnly},
		{Kubelet, "client-ca-file=/etc/ca.crt",
			`--kubelet-arg "client-ca-file=/etc/ca.crt" collides with --client-ca-file, which k1m sets for kubelet itself: k1m keeps the cluster CA (the kubelet verifies kube-apiserver's client certificate with it)`},
		{Kubelet, "config-dir=/etc/kubelet.conf.d",
			`--kubelet-arg "config-dir=/etc/kubelet.conf.d": a drop-in directory overrides the KubeletConfiguration k1m writes, anonymous requests and authorization included: pass the kubelet's flags one by one with --kubelet-arg`},
	}
	for _, c := range cases {
		got, err := c.c.Parse([]string{c.value})
		if got != nil || err == nil || err.Error() != c.want {
			t.Errorf("%s %q: parsed %v\n got %v\nwant %s", c.c.Flag, c.value, got, err, c.want)
		}
	}
}

// What k1m itself runs with, and what only adds to it, passes.
func TestParseAcceptsKeptAuth(t *testing.T) {
	cases := []struct {
		c      Component
		values []string
	}{
		{APIServer, []string{"authorization-mode=Node,RBAC", "authorization-mode=Node,RBAC,Webhook", "authorization-mode=Webhook,Node,RBAC", "authorization-webhook-config-file=/etc/k1m/webhook.kubeconfig"}},
		{Kubelet, []string{"anonymous-auth=false", "anonymous-auth=F", "anonymous-auth=0", "authorization-mode=Webhook", "read-only-port=0", "read-only-port=00", "authentication-token-webhook=false"}},
		// The same names mean nothing to the other components.
		{KubeProxy, []string{"read-only-port=10255"}},
	}
	for _, c := range cases {
		got, err := c.c.Parse(c.values)
		if err != nil {
			t.Errorf("%s %q: %v", c.c.Flag, c.values, err)
			continue
		}
		var want []Arg
		for _, v := range c.values {
			name, value, _ := strings.Cut(v, "=")
			want = append(want, Arg{name, value})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", c.c.Flag, got, want)
		}
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
