// Package manifests holds what k1m server deploys into every cluster
// (node and admin RBAC, CoreDNS, the packaged components) and applies it
// with server-side apply.
package manifests

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/template"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"k1m.dev/k1m/pkg/constants"
)

//go:embed *.yaml
var files embed.FS

// Values fill the templates.
type Values struct {
	ClusterDomain  string
	ClusterDNS     string
	CoreDNSImage   string
	BootstrapGroup string
	AdminGroup     string
	// CoreDNSReplicas is what pkg/dnsscale sets for the cluster's size
	// (dnsscale.Initial), so that applying agrees with it.
	CoreDNSReplicas int32
	// LocalStoragePath is the directory on each node the local-path
	// provisioner makes volumes in; LocalPathProvisionerImage its image,
	// HelperImage that of its helper pods.
	LocalStoragePath, LocalPathProvisionerImage, HelperImage string
	// MetricsServerImage is metrics-server's image, MetricsServerCPU and
	// MetricsServerMemory its requests (pkg/metricsserver), and
	// KubeletServingCA (PEM) the CA it checks kubelets' serving
	// certificates with.
	MetricsServerImage, MetricsServerCPU, MetricsServerMemory, KubeletServingCA string
	// KubeletInsecureTLS has metrics-server take kubelets' serving
	// certificates unchecked, KubeletServingCA unused: for the kind node
	// image alone, whose kubeadm kubelets serve self-signed certificates
	// (as metrics-server's manifests for kind do). k1m server never sets
	// it.
	KubeletInsecureTLS bool
	// Disabled are packaged components (constants.Components) to leave
	// out: Apply deletes what of them an earlier start applied.
	Disabled []string
}

// componentFiles names the manifest of each packaged component; every
// other file is always applied.
var componentFiles = map[string]string{
	constants.ComponentLocalStorage:  "local-storage.yaml",
	constants.ComponentMetricsServer: "metrics-server.yaml",
	constants.ComponentNetworkPolicy: "network-policy.yaml",
}

// Objects renders the manifests to apply, in file order, and those of the
// disabled components, to remove.
func Objects(v Values) (apply, remove []*unstructured.Unstructured, err error) {
	for name, value := range map[string]string{"ClusterDomain": v.ClusterDomain, "ClusterDNS": v.ClusterDNS, "CoreDNSImage": v.CoreDNSImage, "BootstrapGroup": v.BootstrapGroup, "AdminGroup": v.AdminGroup,
		"LocalStoragePath": v.LocalStoragePath, "LocalPathProvisionerImage": v.LocalPathProvisionerImage, "HelperImage": v.HelperImage,
		"MetricsServerImage": v.MetricsServerImage, "MetricsServerCPU": v.MetricsServerCPU, "MetricsServerMemory": v.MetricsServerMemory, "KubeletServingCA": v.KubeletServingCA} {
		if value == "" {
			return nil, nil, fmt.Errorf("manifests: %s is empty", name)
		}
	}
	if v.CoreDNSReplicas < 1 {
		return nil, nil, fmt.Errorf("manifests: CoreDNSReplicas is %d, want at least 1", v.CoreDNSReplicas)
	}
	disabled := map[string]bool{}
	for _, c := range v.Disabled {
		if componentFiles[c] == "" {
			return nil, nil, fmt.Errorf("manifests: no packaged component %q (want one of %v)", c, constants.Components)
		}
		disabled[componentFiles[c]] = true
	}
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, name := range names {
		objs, err := Render(name, v)
		if err != nil {
			return nil, nil, err
		}
		if disabled[name] {
			remove = append(remove, objs...)
		} else {
			apply = append(apply, objs...)
		}
	}
	return apply, remove, nil
}

// Component renders one packaged component's manifest (for the kind node
// image, which applies it itself).
func Component(name string, v Values) ([]byte, error) {
	file := componentFiles[name]
	if file == "" {
		return nil, fmt.Errorf("manifests: no packaged component %q (want one of %v)", name, constants.Components)
	}
	if name == constants.ComponentMetricsServer && v.KubeletServingCA == "" && !v.KubeletInsecureTLS {
		return nil, errors.New("manifests: metrics-server needs KubeletServingCA, or KubeletInsecureTLS where kubelets serve self-signed certificates")
	}
	return execute(file, v)
}

// Render renders one manifest file into its objects.
func Render(name string, v Values) ([]*unstructured.Unstructured, error) {
	data, err := execute(name, v)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("manifests/%s: %w", name, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("manifests/%s: an object without kind or name", name)
		}
		objs = append(objs, &obj)
	}
	return objs, nil
}

func execute(name string, v Values) ([]byte, error) {
	tmpl, err := template.ParseFS(files, name)
	if err != nil {
		return nil, err
	}
	tmpl.Option("missingkey=error")
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("manifests/%s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// Retired are objects earlier k1m versions applied and this one removes:
// Apply deletes them, so a cluster upgraded in place loses them too.
var Retired = []struct{ Group, Version, Resource, Namespace, Name, Why string }{
	{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "", "k1m:node-autoapprove-bootstrap",
		"it let kube-controller-manager approve a join token's certificate for any node name, an existing node's too; pkg/approver decides those now"},
}

// Apply server-side applies every manifest as field manager k1m, then
// deletes the disabled components' objects (last first: a Namespace goes
// with what is in it) and the retired objects.
func Apply(ctx context.Context, cfg *rest.Config, v Values) error {
	objs, remove, err := Objects(v)
	if err != nil {
		return err
	}
	cfg = applyConfig(cfg)
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	force := true
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		ri := dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		if obj.GetNamespace() == "" {
			ri = dyn.Resource(m.Resource)
		}
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "k1m", Force: &force}); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if err := deleteAll(ctx, mapper, dyn, remove); err != nil {
		return err
	}
	for _, r := range Retired {
		gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
		err := dyn.Resource(gvr).Namespace(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the retired %s %s: %w", r.Resource, r.Name, err)
		}
	}
	return nil
}

// applyBurst is the request burst Apply's client has. client-go's default
// (5 a second, burst 10) made applying the 45 objects take about 7 s of
// every server start; one start's apply is a fixed number of requests,
// whatever the cluster's size, so it need not be spread out.
const applyBurst = 200

// applyConfig is cfg with a client rate limit Apply never waits on.
func applyConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = applyBurst, applyBurst
	c.RateLimiter = nil
	return c
}

// deleteAll deletes objs, last first (a Namespace goes after what is in
// it, and takes the rest with it).
func deleteAll(ctx context.Context, mapper meta.RESTMapper, dyn dynamic.Interface, objs []*unstructured.Unstructured) error {
	for i := len(objs) - 1; i >= 0; i-- {
		if err := deleteObject(ctx, mapper, dyn, objs[i]); err != nil {
			return err
		}
	}
	return nil
}

// deleteObject deletes obj unless it is gone already, or its kind is not
// served (nothing of it can be left).
func deleteObject(ctx context.Context, mapper meta.RESTMapper, dyn dynamic.Interface, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	ri := dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	if obj.GetNamespace() == "" {
		ri = dyn.Resource(m.Resource)
	}
	err = ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	// A Namespace being deleted answers Conflict: it goes once empty.
	if apierrors.IsConflict(err) && gvk.Kind == "Namespace" {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s/%s of a disabled component: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
