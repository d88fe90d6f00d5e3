// Package manifests holds what k1m server deploys into every cluster
// (node and admin RBAC, CoreDNS) and applies it with server-side apply.
package manifests

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"sort"
	"text/template"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
}

// Objects renders every manifest, in file order.
func Objects(v Values) ([]*unstructured.Unstructured, error) {
	for name, value := range map[string]string{"ClusterDomain": v.ClusterDomain, "ClusterDNS": v.ClusterDNS, "CoreDNSImage": v.CoreDNSImage, "BootstrapGroup": v.BootstrapGroup, "AdminGroup": v.AdminGroup} {
		if value == "" {
			return nil, fmt.Errorf("manifests: %s is empty", name)
		}
	}
	if v.CoreDNSReplicas < 1 {
		return nil, fmt.Errorf("manifests: CoreDNSReplicas is %d, want at least 1", v.CoreDNSReplicas)
	}
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		tmpl, err := template.ParseFS(files, name)
		if err != nil {
			return nil, err
		}
		tmpl.Option("missingkey=error")
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, v); err != nil {
			return nil, fmt.Errorf("manifests/%s: %w", name, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(&buf, 4096)
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
	}
	return objs, nil
}

// Retired are objects earlier k1m versions applied and this one removes:
// Apply deletes them, so a cluster upgraded in place loses them too.
var Retired = []struct{ Group, Version, Resource, Namespace, Name, Why string }{
	{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "", "k1m:node-autoapprove-bootstrap",
		"it let kube-controller-manager approve a join token's certificate for any node name, an existing node's too; pkg/approver decides those now"},
}

// Apply server-side applies every manifest as field manager k1m, then
// deletes the retired objects.
func Apply(ctx context.Context, cfg *rest.Config, v Values) error {
	objs, err := Objects(v)
	if err != nil {
		return err
	}
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
	for _, r := range Retired {
		gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
		err := dyn.Resource(gvr).Namespace(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the retired %s %s: %w", r.Resource, r.Name, err)
		}
	}
	return nil
}
