package agent

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/join"
	"k1m.dev/k1m/pkg/nodename"
	"k1m.dev/k1m/pkg/podnet"
)

func TestJoinErrorsSpeakTheUsersWords(t *testing.T) {
	serverErr := &join.Error{Input: join.InputServer, Err: errors.New("cannot reach kube-apiserver (refused)")}
	tokenErr := &join.Error{Input: join.InputToken, Err: errors.New("the server refused the token")}
	agent := config.Agent{Server: "https://[fddf:4035:b520::1]:6443"}
	embedded := config.Agent{Server: "https://[::1]:6443", Embedded: true}
	for _, c := range []struct {
		cfg  config.Agent
		err  error
		want string
	}{
		{agent, serverErr, "--server https://[fddf:4035:b520::1]:6443: cannot reach kube-apiserver (refused)"},
		{agent, tokenErr, "--token: the server refused the token"},
		{embedded, serverErr, "the server's own node could not join its kube-apiserver at https://[::1]:6443: cannot reach kube-apiserver (refused)"},
		{embedded, tokenErr, "the server's own node could not join its kube-apiserver at https://[::1]:6443: the server refused the token"},
		{agent, errors.New("other"), "other"},
	} {
		if got := joinError(c.cfg, c.err).Error(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

// The phases run in the package doc's order; the server's own node,
// which talks to its local kube-apiserver, starts no balancer.
func TestPhases(t *testing.T) {
	all := []string{"preflight", "balancer", "join", "forwarding", "containerd", "images", "kubelet", "bootstrap", "client", "pod-network", "kube-proxy", "watch", "supervise"}
	for _, c := range []struct {
		name string
		cfg  config.CompletedAgent
		want []string
	}{
		{"agent", config.CompletedAgent{BalancerListen: "[::1]:6444"}, all},
		{"server's own node", config.CompletedAgent{Agent: config.Agent{Embedded: true}}, slices.Delete(slices.Clone(all), 1, 2)},
	} {
		var got []string
		for _, p := range (&node{cfg: &c.cfg}).phases() {
			got = append(got, p.name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: phases\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A node's data directory made for one name refuses another, naming both
// and the flag.
func TestNodeNameIsTheDataDirectorys(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "kubelet-pki", "kubelet-client-current.pem")
	if err := nodename.Record(dir, "k1m-node-1"); err != nil {
		t.Fatal(err)
	}
	if err := checkNodeName(dir, cert, "k1m-node-1"); err != nil {
		t.Errorf("restart: %v", err)
	}
	want := "--node-name k1m-node-2 (the host name when not given): the data directory " + dir + " was made for node k1m-node-1: start it with --node-name k1m-node-1, or give this node an empty --data-dir (and remove the old one: k1m kubectl delete node k1m-node-1)"
	if err := checkNodeName(dir, cert, "k1m-node-2"); err == nil || err.Error() != want {
		t.Errorf("another name:\n got %v\nwant %s", err, want)
	}
}

// The node's routes come from the servers' route ConfigMaps unless the
// cluster's pod ranges are routed by the provider (k1m-cluster's
// podRoutes, k1m when an earlier release wrote none).
func TestRouteSourceFollowsTheCluster(t *testing.T) {
	for routes, want := range map[constants.PodRoutes]podnet.RouteSource{
		constants.PodRoutesK1m:      podnet.RoutesPublished,
		constants.PodRoutesProvider: podnet.RoutesByProvider,
	} {
		if got := routeSource(routes); got != want {
			t.Errorf("routeSource(%s) = %v, want %v", routes, got, want)
		}
	}
}
