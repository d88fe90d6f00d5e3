package manifests

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestObjectsRenderWithEveryValue(t *testing.T) {
	objs, err := Objects(Values{ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", CoreDNSImage: "registry.k8s.io/coredns/coredns:v1.11.3", BootstrapGroup: "system:bootstrappers:k1m:default-node-token", AdminGroup: "k1m:cluster-admins", CoreDNSReplicas: 7})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var svcIP, image string
	var replicas any
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "Service" && o.GetName() == "kube-dns" {
			svcIP, _, _ = unstructured.NestedString(o.Object, "spec", "clusterIP")
		}
		if o.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			image = containers[0].(map[string]any)["image"].(string)
			replicas, _, _ = unstructured.NestedFieldCopy(o.Object, "spec", "replicas")
		}
	}
	if fmt.Sprint(replicas) != "7" {
		t.Errorf("CoreDNS replicas = %v, want 7", replicas)
	}
	if svcIP != "fddf:4035:b510::a" {
		t.Errorf("kube-dns clusterIP = %q", svcIP)
	}
	if image != "registry.k8s.io/coredns/coredns:v1.11.3" {
		t.Errorf("CoreDNS image = %q", image)
	}
	for _, o := range objs {
		for _, r := range Retired {
			if o.GetName() == r.Name {
				t.Errorf("%s %s is both applied and retired", o.GetKind(), o.GetName())
			}
		}
		// No binding may let a join token's group approve node client
		// certificates itself (the approver refuses takeovers instead).
		if roleRef, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); roleRef == "system:certificates.k8s.io:certificatesigningrequests:nodeclient" {
			t.Errorf("%s %s grants auto-approval of node client certificates", o.GetKind(), o.GetName())
		}
	}
	admins := false
	for _, o := range objs {
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		roleRef, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if o.GetName() == "k1m:cluster-admins" && roleRef == "cluster-admin" && len(subjects) == 1 && subjects[0].(map[string]any)["name"] == "k1m:cluster-admins" {
			admins = true
		}
	}
	if !admins {
		t.Error("no ClusterRoleBinding k1m:cluster-admins of the admin group to cluster-admin")
	}
	if kinds["ClusterRoleBinding"] < 5 || kinds["Deployment"] != 1 {
		t.Errorf("unexpected kinds: %v", kinds)
	}
}

func TestNoCoreDNSReplicasIsAnError(t *testing.T) {
	_, err := Objects(Values{ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", CoreDNSImage: "x", BootstrapGroup: "g", AdminGroup: "a"})
	if want := "manifests: CoreDNSReplicas is 0, want at least 1"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

func TestEmptyValueIsAnError(t *testing.T) {
	_, err := Objects(Values{ClusterDomain: "cluster.local", CoreDNSImage: "x", BootstrapGroup: "g", AdminGroup: "a"})
	if err == nil || !strings.Contains(err.Error(), "ClusterDNS") {
		t.Fatalf("want an error naming ClusterDNS, got %v", err)
	}
}
