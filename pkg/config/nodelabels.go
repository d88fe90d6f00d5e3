package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"k1m.dev/k1m/pkg/componentargs"
)

// addNodeFlags binds --node-label and --node-taint, on agents and servers
// alike (a server's apply to its own node).
func addNodeFlags(fs *pflag.FlagSet, labels, taints *[]string) {
	fs.StringArrayVar(labels, "node-label", *labels, "label the node has from its registration, KEY=VALUE (repeatable), e.g. topology.kubernetes.io/zone=zone-a")
	fs.StringArrayVar(taints, "node-taint", *taints, "taint the node has from its registration, KEY[=VALUE]:EFFECT (repeatable), e.g. dedicated=cassandra:NoSchedule")
}

// checkNodeFlags validates --node-label and --node-taint, and refuses
// them beside the kubelet flags they set (one way to say each).
func checkNodeFlags(labels, taints []string, passThrough PassThrough) error {
	var errs []error
	if _, err := parseNodeLabels("--node-label", labels); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseNodeTaints("--node-taint", taints); err != nil {
		errs = append(errs, err)
	}
	for _, arg := range passThrough[componentargs.Kubelet.Name] {
		switch {
		case arg.Name == "node-labels" && len(labels) > 0:
			errs = append(errs, fmt.Errorf("--node-label and --kubelet-arg=node-labels are both given: give the labels with --node-label"))
		case arg.Name == "register-with-taints" && len(taints) > 0:
			errs = append(errs, fmt.Errorf("--node-taint and --kubelet-arg=register-with-taints are both given: give the taints with --node-taint"))
		}
	}
	return errors.Join(errs...)
}

// parseNodeLabels reads --node-label's KEY=VALUE pairs (flag names the
// flag in errors). The kubelet applies them when it registers its Node,
// and the NodeRestriction admission lets a node set only some labels
// under kubernetes.io and k8s.io on itself: others there are refused
// here, as the kubelet would refuse to start with them.
func parseNodeLabels(flag string, given []string) (map[string]string, error) {
	if len(given) == 0 {
		return nil, nil
	}
	labels := map[string]string{}
	for _, kv := range given {
		key, value, found := strings.Cut(kv, "=")
		if !found {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE, e.g. topology.kubernetes.io/zone=zone-a", flag, kv)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("%s %q: the key %s", flag, kv, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("%s %q: the value %s", flag, kv, strings.Join(errs, "; "))
		}
		if restricted(key) && !kubeletapis.IsKubeletLabel(key) {
			return nil, fmt.Errorf("%s %q: a node may set on itself only these kubernetes.io and k8s.io labels: %s, and those under %s (NodeRestriction); choose a key of your own domain",
				flag, kv, strings.Join(kubeletapis.KubeletLabels(), ", "), strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "))
		}
		if previous, twice := labels[key]; twice && previous != value {
			return nil, fmt.Errorf("%s: %s is given twice, as %q and %q: give it once", flag, key, previous, value)
		}
		labels[key] = value
	}
	return labels, nil
}

// restricted tells whether key lies in the kubernetes.io or k8s.io
// namespaces, whose labels the kubelet may set on its Node only when
// kubeletapis allows them.
func restricted(key string) bool {
	namespace, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, domain := range []string{"kubernetes.io", "k8s.io"} {
		if namespace == domain || strings.HasSuffix(namespace, "."+domain) {
			return true
		}
	}
	return false
}

// taintEffects are the effects a taint may have.
var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// parseNodeTaints reads --node-taint's KEY[=VALUE]:EFFECT, the form of
// kubectl taint: the kubelet registers its Node with them.
func parseNodeTaints(flag string, given []string) ([]corev1.Taint, error) {
	var taints []corev1.Taint
	for _, spec := range given {
		t, err := parseTaint(spec)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", flag, spec, err)
		}
		if slices.ContainsFunc(taints, func(o corev1.Taint) bool { return o.Key == t.Key && o.Effect == t.Effect }) {
			return nil, fmt.Errorf("%s: %s:%s is given twice: give it once", flag, t.Key, t.Effect)
		}
		taints = append(taints, t)
	}
	return taints, nil
}

func parseTaint(spec string) (corev1.Taint, error) {
	const want = "want KEY[=VALUE]:EFFECT, e.g. dedicated=cassandra:NoSchedule"
	kv, effect, found := strings.Cut(spec, ":")
	if !found {
		return corev1.Taint{}, fmt.Errorf("no effect: %s", want)
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
	t.Key, t.Value, _ = strings.Cut(kv, "=")
	if !slices.Contains(taintEffects, t.Effect) {
		return corev1.Taint{}, fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", effect)
	}
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("the key %s (%s)", strings.Join(errs, "; "), want)
	}
	if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("the value %s", strings.Join(errs, "; "))
	}
	return t, nil
}
