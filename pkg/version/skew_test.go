package version

import "testing"

func TestCheckAgent(t *testing.T) {
	const a, b = "[fddf::1:1]:6443", "[fddf::1:2]:6443"
	for _, c := range []struct {
		name, agent string
		servers     map[string]string
		want        string
	}{
		{"same release", "v1.32.5+k1m.aaaa", map[string]string{a: "v1.32.5+k1m.bbbb"}, ""},
		{"an older patch", "v1.32.4+k1m.aaaa", map[string]string{a: "v1.32.5+k1m.bbbb"}, ""},
		{"three minors older", "v1.29.0+k1m.aaaa", map[string]string{a: "v1.32.5+k1m.bbbb"}, ""},
		{"newer than one server", "v1.33.0+k1m.aaaa", map[string]string{a: "v1.33.1+k1m.bbbb", b: "v1.32.5+k1m.cccc"},
			"this agent runs v1.33.0+k1m.aaaa and server [fddf::1:2]:6443 runs v1.32.5+k1m.cccc: an agent may not be newer than a server (a kubelet may not be newer than kube-apiserver); upgrade every server first"},
		{"four minors older", "v1.28.9+k1m.aaaa", map[string]string{a: "v1.32.5+k1m.bbbb"},
			"this agent runs v1.28.9+k1m.aaaa and server [fddf::1:1]:6443 runs v1.32.5+k1m.bbbb: an agent may be at most 3 minor releases older than a server; upgrade this agent"},
		{"an unstamped build", "v0.0.0-master+$Format:%H$", map[string]string{a: "v1.32.5+k1m.bbbb"}, ""},
		{"a server without a release", "v1.32.5+k1m.aaaa", map[string]string{a: ""}, ""},
		{"no servers recorded", "v1.32.5+k1m.aaaa", nil, ""},
	} {
		err := CheckAgent(c.agent, c.servers)
		if got := errString(err); got != c.want {
			t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestCheckServer(t *testing.T) {
	const own, other = "[fddf::1:1]:6443", "[fddf::1:2]:6443"
	for _, c := range []struct {
		name, server string
		servers      map[string]string
		want         string
	}{
		{"one minor newer (a rolling upgrade)", "v1.33.0+k1m.aaaa", map[string]string{own: "v1.32.5+k1m.old", other: "v1.32.5+k1m.bbbb"}, ""},
		{"one minor older", "v1.32.5+k1m.aaaa", map[string]string{other: "v1.33.0+k1m.bbbb"}, ""},
		{"two minors newer", "v1.34.0+k1m.aaaa", map[string]string{own: "v1.33.0+k1m.old", other: "v1.32.5+k1m.bbbb"},
			"this server runs v1.34.0+k1m.aaaa and server [fddf::1:2]:6443 runs v1.32.5+k1m.bbbb: servers may differ by at most 1 minor release; upgrade one release at a time, every server before the next"},
		{"its own old record", "v1.34.0+k1m.aaaa", map[string]string{own: "v1.32.5+k1m.old"}, ""},
	} {
		err := CheckServer(c.server, own, c.servers)
		if got := errString(err); got != c.want {
			t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
