package agent

import (
	"errors"
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
