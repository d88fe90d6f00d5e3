package manifests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"k1m.dev/k1m/pkg/constants"
)

// values fills every value.
func values() Values {
	return Values{ClusterDomain: "cluster.local", ClusterDNS: "fddf:4035:b510::a", CoreDNSImage: "registry.k8s.io/coredns/coredns:v1.11.3",
		BootstrapGroup: "system:bootstrappers:k1m:default-node-token", AdminGroup: "k1m:cluster-admins", CoreDNSReplicas: 7,
		LocalStoragePath: "/var/lib/k1m/storage", LocalPathProvisionerImage: "docker.io/rancher/local-path-provisioner:v0.0.30", HelperImage: "k1m.local/busybox:1.35",
		MetricsServerImage: "registry.k8s.io/metrics-server/metrics-server:v0.8.0", MetricsServerCPU: "200m", MetricsServerMemory: "400Mi",
		KubeletServingCA: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
}

func TestObjectsRenderWithEveryValue(t *testing.T) {
	objs, remove, err := Objects(values())
	if err != nil {
		t.Fatal(err)
	}
	if len(remove) != 0 {
		t.Errorf("nothing disabled, yet %d objects to remove", len(remove))
	}
	kinds := map[string]int{}
	var svcIP, image string
	var replicas any
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "Service" && o.GetName() == "kube-dns" {
			svcIP, _, _ = unstructured.NestedString(o.Object, "spec", "clusterIP")
		}
		if o.GetKind() == "Deployment" && o.GetName() == "coredns" {
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
	if kinds["ClusterRoleBinding"] < 5 || kinds["Deployment"] != 3 {
		t.Errorf("unexpected kinds: %v", kinds)
	}
}

func TestNoCoreDNSReplicasIsAnError(t *testing.T) {
	v := values()
	v.CoreDNSReplicas = 0
	_, _, err := Objects(v)
	if want := "manifests: CoreDNSReplicas is 0, want at least 1"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

func TestEmptyValueIsAnError(t *testing.T) {
	v := values()
	v.ClusterDNS = ""
	_, _, err := Objects(v)
	if want := "manifests: ClusterDNS is empty"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

// find returns the object of that kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objs))
	return nil
}

// into decodes an object strictly into its typed form.
func into(t *testing.T, o *unstructured.Unstructured, out any) {
	t.Helper()
	data, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func TestLocalStorageIsTheDefaultClassWaitingForTheFirstConsumer(t *testing.T) {
	objs, _, err := Objects(values())
	if err != nil {
		t.Fatal(err)
	}
	var class storagev1.StorageClass
	into(t, find(t, objs, "StorageClass", "local-path"), &class)
	wait, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	want := storagev1.StorageClass{
		TypeMeta:          class.TypeMeta,
		ObjectMeta:        metav1.ObjectMeta{Name: "local-path", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "rancher.io/local-path",
		ReclaimPolicy:     &del,
		VolumeBindingMode: &wait,
	}
	if !equality.Semantic.DeepEqual(class, want) {
		t.Errorf("StorageClass local-path:\n got %+v\nwant %+v", class, want)
	}
	var config corev1.ConfigMap
	into(t, find(t, objs, "ConfigMap", "local-path-config"), &config)
	if got, want := config.Data["config.json"], `{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/var/lib/k1m/storage"]}]}`; got != want {
		t.Errorf("config.json = %s, want %s", got, want)
	}
	var deploy appsv1.Deployment
	into(t, find(t, objs, "Deployment", "local-path-provisioner"), &deploy)
	c := deploy.Spec.Template.Spec.Containers[0]
	if c.Image != "docker.io/rancher/local-path-provisioner:v0.0.30" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("provisioner image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
}

func TestDisabledComponentIsRemovedNotApplied(t *testing.T) {
	v := values()
	v.Disabled = []string{"local-storage"}
	apply, remove, err := Objects(v)
	if err != nil {
		t.Fatal(err)
	}
	all, err := Render("local-storage.yaml", v)
	if err != nil {
		t.Fatal(err)
	}
	if len(remove) != len(all) {
		t.Errorf("%d objects to remove, want the %d of local-storage.yaml", len(remove), len(all))
	}
	for _, o := range apply {
		if o.GetNamespace() == "local-path-storage" || o.GetName() == "local-path" || o.GetName() == "local-path-storage" {
			t.Errorf("%s %s of a disabled component is applied", o.GetKind(), o.GetName())
		}
	}
	find(t, apply, "Deployment", "coredns")
}

func TestUnknownComponentIsAnError(t *testing.T) {
	v := values()
	v.Disabled = []string{"traefik"}
	_, _, err := Objects(v)
	want := `manifests: no packaged component "traefik" (want one of [local-storage metrics-server network-policy])`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	if _, err := Component("traefik", v); err == nil || err.Error() != want {
		t.Fatalf("Component: error %v, want %s", err, want)
	}
}

// A disabled component's objects an earlier start applied are deleted;
// deleting again (the next start) finds nothing and is no error.
func TestDeleteAllOfADisabledComponent(t *testing.T) {
	v := values()
	v.Disabled = []string{"local-storage"}
	_, remove, err := Objects(v)
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	listKinds := map[schema.GroupVersionResource]string{}
	var existing []runtime.Object
	for _, o := range remove {
		gvk := o.GroupVersionKind()
		scope := meta.RESTScopeNamespace
		if o.GetNamespace() == "" {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvk, scope)
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		listKinds[m.Resource] = gvk.Kind + "List"
		existing = append(existing, o.DeepCopy())
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, existing...)
	ctx := context.Background()
	for round := 1; round <= 2; round++ {
		if err := deleteAll(ctx, mapper, dyn, remove); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	var deleted []string
	for _, a := range dyn.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			deleted = append(deleted, d.GetResource().Resource+"/"+d.GetName())
		}
	}
	var want []string
	for i := len(remove) - 1; i >= 0; i-- {
		m, _ := mapper.RESTMapping(remove[i].GroupVersionKind().GroupKind(), remove[i].GroupVersionKind().Version)
		want = append(want, m.Resource.Resource+"/"+remove[i].GetName())
	}
	if want = append(want, want...); !slices.Equal(deleted, want) {
		t.Errorf("deletes %v, want each object last first, twice: %v", deleted, want)
	}
	for gvr := range listKinds {
		if list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) > 0 {
			t.Errorf("%s left: %v (%v)", gvr.Resource, list, err)
		}
	}
	// A kind the cluster does not serve has nothing to delete.
	gone := &unstructured.Unstructured{}
	gone.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gone"})
	gone.SetName("x")
	if err := deleteAll(ctx, mapper, dyn, []*unstructured.Unstructured{gone}); err != nil {
		t.Errorf("deleting an unserved kind: %v", err)
	}
}

func TestMetricsServerSizedAndTrustingTheKubeletServingCA(t *testing.T) {
	objs, _, err := Objects(values())
	if err != nil {
		t.Fatal(err)
	}
	var ca corev1.ConfigMap
	into(t, find(t, objs, "ConfigMap", "k1m-kubelet-serving-ca"), &ca)
	if got, want := ca.Data["ca.crt"], values().KubeletServingCA; got != want {
		t.Errorf("ca.crt = %q, want the PEM %q", got, want)
	}
	var deploy appsv1.Deployment
	into(t, find(t, objs, "Deployment", "metrics-server"), &deploy)
	c := deploy.Spec.Template.Spec.Containers[0]
	wantRequests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("400Mi")}
	if !equality.Semantic.DeepEqual(c.Resources.Requests, wantRequests) {
		t.Errorf("metrics-server requests %v, want %v", c.Resources.Requests, wantRequests)
	}
	wantArgs := []string{"--cert-dir=/tmp", "--bind-address=::", "--secure-port=10250", "--kubelet-preferred-address-types=InternalIP",
		"--kubelet-use-node-status-port", "--kubelet-certificate-authority=/etc/k1m/kubelet-serving-ca/ca.crt", "--metric-resolution=15s"}
	if !slices.Equal(c.Args, wantArgs) || c.Image != "registry.k8s.io/metrics-server/metrics-server:v0.8.0" {
		t.Errorf("metrics-server image %s args %q, want %q", c.Image, c.Args, wantArgs)
	}
	find(t, objs, "APIService", "v1beta1.metrics.k8s.io")
}

// Apply's requests (discovery, an apply per object, a delete per removed
// or retired one) all fit in its client's burst, so no server start waits
// on client-side throttling; the caller's config is left as it was.
func TestApplyNeverWaitsOnItsRateLimit(t *testing.T) {
	apply, remove, err := Objects(values())
	if err != nil {
		t.Fatal(err)
	}
	const discovery = 4 // /api, /apis, and a retry of each at most
	if n := discovery + len(apply) + len(remove) + len(Retired); n > applyBurst {
		t.Errorf("Apply makes up to %d requests, over its burst of %d", n, applyBurst)
	}
	caller := &rest.Config{Host: "https://[::1]:6443", QPS: 5, Burst: 10}
	got := applyConfig(caller)
	want := &rest.Config{Host: "https://[::1]:6443", QPS: applyBurst, Burst: applyBurst}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("applyConfig: %+v, want %+v", got, want)
	}
	if caller.QPS != 5 || caller.Burst != 10 {
		t.Errorf("the caller's config changed: QPS %v, burst %d", caller.QPS, caller.Burst)
	}
}

// The kind node image's metrics-server takes the kubelets' self-signed
// certificates unchecked: no CA ConfigMap, no CA volume, the flag instead.
// A metrics-server with neither a CA nor that choice is refused.
func TestMetricsServerForKindTakesKubeletCertificatesUnchecked(t *testing.T) {
	v := Values{MetricsServerImage: "registry.k8s.io/metrics-server/metrics-server:v0.8.0", MetricsServerCPU: "100m", MetricsServerMemory: "200Mi", KubeletInsecureTLS: true}
	if _, err := Component(constants.ComponentMetricsServer, v); err != nil {
		t.Fatal(err)
	}
	objs, err := Render("metrics-server.yaml", v)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			t.Errorf("ConfigMap %s rendered, want none", o.GetName())
		}
	}
	var deploy appsv1.Deployment
	into(t, find(t, objs, "Deployment", "metrics-server"), &deploy)
	pod := deploy.Spec.Template.Spec
	wantArgs := []string{"--cert-dir=/tmp", "--bind-address=::", "--secure-port=10250", "--kubelet-preferred-address-types=InternalIP",
		"--kubelet-use-node-status-port", "--kubelet-insecure-tls", "--metric-resolution=15s"}
	if !slices.Equal(pod.Containers[0].Args, wantArgs) {
		t.Errorf("args %q, want %q", pod.Containers[0].Args, wantArgs)
	}
	var volumes []string
	for _, vol := range pod.Volumes {
		volumes = append(volumes, vol.Name)
	}
	if !slices.Equal(volumes, []string{"tmp-dir"}) {
		t.Errorf("volumes %v, want [tmp-dir]", volumes)
	}
	v.KubeletInsecureTLS = false
	if _, err := Component(constants.ComponentMetricsServer, v); err == nil ||
		err.Error() != "manifests: metrics-server needs KubeletServingCA, or KubeletInsecureTLS where kubelets serve self-signed certificates" {
		t.Errorf("neither a CA nor unchecked certificates: %v", err)
	}
}
