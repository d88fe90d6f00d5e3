package agent

import (
	"errors"
	"slices"
	"testing"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/join"
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
