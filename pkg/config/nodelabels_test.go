package config

import (
	"reflect"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"k1m.dev/k1m/pkg/componentargs"
)

func TestParseNodeLabels(t *testing.T) {
	got, err := parseNodeLabels("--node-label", []string{"topology.kubernetes.io/zone=zone-a", "example.com/rack=r1", "tier=", "example.com/rack=r1"})
	want := map[string]string{"topology.kubernetes.io/zone": "zone-a", "example.com/rack": "r1", "tier": ""}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseNodeLabels = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []struct{ given, want string }{
		{"zone", `--node-label "zone": want KEY=VALUE, e.g. topology.kubernetes.io/zone=zone-a`},
		{"node-role.kubernetes.io/worker=true", `--node-label "node-role.kubernetes.io/worker=true": a node may set on itself only these kubernetes.io and k8s.io labels: ` +
			`beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, ` +
			`kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone, ` +
			`and those under kubelet.kubernetes.io, node.kubernetes.io (NodeRestriction); choose a key of your own domain`},
		{"bad key!=x", `--node-label "bad key!=x": the key name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
	} {
		if _, err := parseNodeLabels("--node-label", []string{bad.given}); err == nil || err.Error() != bad.want {
			t.Errorf("parseNodeLabels(%q) = %v\nwant %s", bad.given, err, bad.want)
		}
	}
	if _, err := parseNodeLabels("--node-label", []string{"a=1", "a=2"}); err == nil || err.Error() != `--node-label: a is given twice, as "1" and "2": give it once` {
		t.Errorf("a label given twice: %v", err)
	}
	if got, err := parseNodeLabels("--node-label", []string{"kubelet.kubernetes.io/x=y", "sub.node.kubernetes.io/z=1"}); err != nil || len(got) != 2 {
		t.Errorf("labels under the kubelet's own namespaces: %v, %v; want both", got, err)
	}
}

func TestParseNodeTaints(t *testing.T) {
	got, err := parseNodeTaints("--node-taint", []string{"dedicated=cassandra:NoSchedule", "example.com/spot:PreferNoSchedule", "dedicated=cassandra:NoExecute"})
	want := []corev1.Taint{{Key: "dedicated", Value: "cassandra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/spot", Effect: corev1.TaintEffectPreferNoSchedule}, {Key: "dedicated", Value: "cassandra", Effect: corev1.TaintEffectNoExecute}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseNodeTaints = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []struct{ given, want string }{
		{"dedicated=cassandra", `--node-taint "dedicated=cassandra": no effect: want KEY[=VALUE]:EFFECT, e.g. dedicated=cassandra:NoSchedule`},
		{"dedicated:Never", `--node-taint "dedicated:Never": effect "Never": want NoSchedule, PreferNoSchedule or NoExecute`},
	} {
		if _, err := parseNodeTaints("--node-taint", []string{bad.given}); err == nil || err.Error() != bad.want {
			t.Errorf("parseNodeTaints(%q) = %v\nwant %s", bad.given, err, bad.want)
		}
	}
	if _, err := parseNodeTaints("--node-taint", []string{"a:NoSchedule", "a=b:NoSchedule"}); err == nil || err.Error() != "--node-taint: a:NoSchedule is given twice: give it once" {
		t.Errorf("a taint given twice: %v", err)
	}
}

func TestNodeFlagsBesideTheKubeletFlags(t *testing.T) {
	pt := PassThrough{componentargs.Kubelet.Name: {{Name: "node-labels", Value: "a=b"}, {Name: "register-with-taints", Value: "c:NoSchedule"}}}
	err := checkNodeFlags([]string{"x=y"}, []string{"d:NoSchedule"}, pt)
	want := "--node-label and --kubelet-arg=node-labels are both given: give the labels with --node-label\n" +
		"--node-taint and --kubelet-arg=register-with-taints are both given: give the taints with --node-taint"
	if err == nil || err.Error() != want {
		t.Errorf("checkNodeFlags = %v, want %s", err, want)
	}
	if err := checkNodeFlags(nil, nil, pt); err != nil {
		t.Errorf("the kubelet flags alone: %v, want none", err)
	}
}

// --node-label and --node-taint, through the flags, complete into the
// node's labels and taints; a bad one is refused naming the flag.
func TestCompleteAgentLabelsAndTaints(t *testing.T) {
	flags := joiningAgent()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	flags.AddFlags(fs)
	if err := fs.Parse([]string{"--node-label", "topology.kubernetes.io/zone=zone-b", "--node-label=example.com/rack=r2", "--node-taint", "dedicated=db:NoSchedule"}); err != nil {
		t.Fatal(err)
	}
	got, err := flags.Complete()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"topology.kubernetes.io/zone": "zone-b", "example.com/rack": "r2"}
	wantTaints := []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	if !reflect.DeepEqual(got.Labels, wantLabels) || !reflect.DeepEqual(got.Taints, wantTaints) {
		t.Errorf("completed labels %v, taints %v; want %v, %v", got.Labels, got.Taints, wantLabels, wantTaints)
	}
	flags.NodeTaints = []string{"dedicated"}
	if _, err := flags.Complete(); err == nil || err.Error() != `--node-taint "dedicated": no effect: want KEY[=VALUE]:EFFECT, e.g. dedicated=cassandra:NoSchedule` {
		t.Errorf("a taint without an effect: %v", err)
	}
}

func TestServerNodeFlags(t *testing.T) {
	s := DefaultServer()
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	s.AddFlags(fs)
	if err := fs.Parse([]string{"--node-label", "node-role.kubernetes.io/control-plane=true"}); err != nil {
		t.Fatal(err)
	}
	// The server refuses it as an agent does, and says nothing else.
	_, want := parseNodeLabels("--node-label", []string{"node-role.kubernetes.io/control-plane=true"})
	if err := s.Validate(); want == nil || err == nil || err.Error() != want.Error() {
		t.Errorf("a server's node-role label: %v\nwant %v", err, want)
	}
}
