package server

import (
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k1m.dev/k1m/pkg/etcd"
)

// The freeze refuses every write to the moved resources and their
// subresources, in every API group and version of theirs, whoever asks.
func TestFreezePolicy(t *testing.T) {
	policy, binding := freezePolicy([]string{"pods", "endpointslices"})
	fail := admissionv1.Fail
	forbidden := metav1.StatusReasonForbidden
	writes := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}
	want := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "k1m-partitions-migration"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				{RuleWithOperations: admissionv1.RuleWithOperations{Operations: writes,
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"pods", "pods/*"}}}},
				{RuleWithOperations: admissionv1.RuleWithOperations{Operations: writes,
					Rule: admissionv1.Rule{APIGroups: []string{"discovery.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"endpointslices", "endpointslices/*"}}}},
			}},
			Validations: []admissionv1.Validation{{Expression: "false", Reason: &forbidden,
				Message: "pods, endpointslices are moving into partitions of the store (k1m etcd-partitions migrate): writes resume when every server runs them"}},
		},
	}
	if !reflect.DeepEqual(policy, want) {
		t.Errorf("policy\n%+v\nwant\n%+v", policy, want)
	}
	wantBinding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "k1m-partitions-migration"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "k1m-partitions-migration",
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	if !reflect.DeepEqual(binding, wantBinding) {
		t.Errorf("binding %+v, want %+v", binding, wantBinding)
	}
}

func TestRequireAdds(t *testing.T) {
	for _, tc := range []struct {
		from, to []string
		want     string
	}{
		{from: []string{}, to: []string{"pods", "nodes"}},
		{from: []string{"pods"}, to: []string{"pods", "endpointslices"}},
		{from: []string{"pods", "nodes"}, to: []string{"nodes"},
			want: "--etcd-partitions=nodes: the cluster keeps pods, nodes in partitions; a migration only adds partitions: give --etcd-partitions with pods,nodes"},
		{from: []string{"pods"}, to: []string{"pods"}, want: "--etcd-partitions=pods: the cluster keeps those in partitions already"},
		{from: []string{}, to: []string{"pods", "configmaps"},
			want: "--etcd-partitions: configmaps: its partition is set only when a cluster is made (servers write configmaps as they start, which a migration's freeze would refuse); partitions a running cluster can add: pods, nodes, endpointslices"},
	} {
		err := requireAdds(etcd.Migration{From: tc.from, To: tc.to})
		if got := errString(err); got != tc.want {
			t.Errorf("%v to %v: %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A server is pending until its record says it started with the layout;
// a lone server publishes nothing and counts by its record.
func TestPendingServers(t *testing.T) {
	to := []string{"pods", "nodes"}
	published := map[string]string{"s1": "https://[fd00::1]:6443", "s2": "https://[fd00::2]:6443", "s3": "https://[fd00::3]:6443"}
	recorded := map[string]etcd.ServerLayout{"s1": {Partitions: to}, "s2": {Partitions: []string{}}}
	if all, pending := pendingServers(published, recorded, to); all != 3 || !reflect.DeepEqual(pending, []string{"s2", "s3"}) {
		t.Errorf("pendingServers = %d, %v; want 3, [s2 s3]", all, pending)
	}
	if all, pending := pendingServers(nil, map[string]etcd.ServerLayout{"lone": {Partitions: to}}, to); all != 1 || len(pending) != 0 {
		t.Errorf("a lone server restarted: %d, %v; want 1, none", all, pending)
	}
	if all, pending := pendingServers(nil, nil, to); all != 1 || len(pending) != 1 {
		t.Errorf("no record at all: %d, %v; want one pending", all, pending)
	}
}
