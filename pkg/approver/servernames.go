package approver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"k1m.dev/k1m/pkg/join"
)

// Server names. A join token must not become system:node:<a server's
// name>: with that identity it would get serving certificates for the
// server's name and addresses. The servers present are the ones
// kube-system/k1m-server-bootstrap publishes (pkg/join: server.<node>,
// durable-etcd.<node>), and the approving server itself, which a lone
// server does not publish. A removed server's keys are deleted there
// (join.ForgetServer), and `k1m server remove` records only its
// kube-apiserver address (join.RecordRemovedServer), not its name: so
// the approver keeps its own record, under serverNamesKey in the same
// ConfigMap, of every server name it has seen published. A server
// published and removed while no approver ran, or removed before this
// record existed, is not in it.
//
// Cost: one field-selected informer on that one ConfigMap (stripped to
// these keys: not the sealed bundle), no request per join; one write per
// new server name.

// ReasonServerName denies a join token a server's node name.
const ReasonServerName = "ServerNodeName"

// serverNamesKey, in k1m-server-bootstrap, is the approver's record: the
// node names of every server ever published there, as a sorted JSON list.
// Only the approver writes it; nothing deletes it.
const serverNamesKey = "approver.server-names"

// serverKeyPrefixes are the keys in k1m-server-bootstrap that name a
// present server (pkg/join's servers.go).
var serverKeyPrefixes = []string{"server.", "durable-etcd."}

// serverBootstrapSelector selects k1m-server-bootstrap alone.
func serverBootstrapSelector(o *metav1.ListOptions) {
	o.FieldSelector = "metadata.name=" + join.ServerBootstrapName
}

// stripServerBootstrap keeps of a ConfigMap the keys that name servers and
// the resourceVersion the record is written under.
func stripServerBootstrap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, ResourceVersion: cm.ResourceVersion}, Data: map[string]string{}}
	for k, v := range cm.Data {
		if k == serverNamesKey || serverKey(k) != "" {
			out.Data[k] = v
		}
	}
	return out, nil
}

// serverKey is the server a key of k1m-server-bootstrap names, or "".
func serverKey(k string) string {
	for _, p := range serverKeyPrefixes {
		if node, ok := strings.CutPrefix(k, p); ok {
			return node
		}
	}
	return ""
}

// serverNames reads present and recorded server names from the cache
// (none: no server published, a lone server).
func (a *Approver) serverNames() (present, recorded sets.Set[string], resourceVersion string, err error) {
	present, recorded = sets.New[string](), sets.New[string]()
	if a.servers == nil {
		return nil, nil, "", errors.New("the approver's cache of the servers' names is not running")
	}
	obj, ok, err := a.servers.GetByKey(metav1.NamespaceSystem + "/" + join.ServerBootstrapName)
	if err != nil || !ok {
		return present, recorded, "", err
	}
	cm := obj.(*corev1.ConfigMap)
	for k := range cm.Data {
		if node := serverKey(k); node != "" {
			present.Insert(node)
		}
	}
	var list []string
	if s, ok := cm.Data[serverNamesKey]; ok {
		if err := json.Unmarshal([]byte(s), &list); err != nil {
			// Approving would be the unsafe side: wait for a readable record.
			return nil, nil, "", errors.New(join.ServerBootstrapName + " " + serverNamesKey + ": " + err.Error())
		}
	}
	return present, recorded.Insert(list...), cm.ResourceVersion, nil
}

// serverNameOf tells whose server node is the name of: "" for none,
// else how that server stands.
func (a *Approver) serverNameOf(node string) (string, error) {
	if node == a.Self && a.Self != "" {
		return "the approving server", nil
	}
	present, recorded, _, err := a.serverNames()
	switch {
	case err != nil:
		return "", err
	case present.Has(node):
		return "present", nil
	case recorded.Has(node):
		return "removed", nil
	}
	return "", nil
}

// recordServerNames adds the servers published now to the record, under
// the resourceVersion read: a change meanwhile fails it, and the change's
// event brings the next try.
func (a *Approver) recordServerNames(ctx context.Context) error {
	present, recorded, rv, err := a.serverNames()
	if err != nil || recorded.IsSuperset(present) {
		return err
	}
	list, _ := json.Marshal(sets.List(recorded.Union(present)))
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"data":     map[string]string{serverNamesKey: string(list)},
	})
	_, err = a.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Patch(ctx, join.ServerBootstrapName, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted since: nothing to record
	}
	return err
}

// keepRecordingServerNames records the servers' names at each change of
// k1m-server-bootstrap (and each resync, which also retries a failure).
func (a *Approver) keepRecordingServerNames(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		if err := a.recordServerNames(ctx); err != nil && ctx.Err() == nil {
			klog.V(2).InfoS("servers' names not recorded yet", "configmap", join.ServerBootstrapName, "err", err)
		}
	}
}

// signal is an event handler that wakes keepRecordingServerNames without
// blocking the informer.
func signal(changed chan<- struct{}) cache.ResourceEventHandlerFuncs {
	wake := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: wake, UpdateFunc: func(_, obj any) { wake(obj) }}
}

// RecordServerName adds node to the approver's record of server names,
// for `k1m server remove`: the removed server's name stays reserved even
// when no approver saw it published. One GET and one update (again on a
// conflict) per removal.
func RecordServerName(ctx context.Context, client kubernetes.Interface, node string) error {
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, join.ServerBootstrapName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading %s/%s: %w", metav1.NamespaceSystem, join.ServerBootstrapName, err)
		}
		var list []string
		if s, ok := cm.Data[serverNamesKey]; ok {
			if err := json.Unmarshal([]byte(s), &list); err != nil {
				return fmt.Errorf("%s/%s %s: %w", metav1.NamespaceSystem, join.ServerBootstrapName, serverNamesKey, err)
			}
		}
		names := sets.New(list...)
		if names.Has(node) {
			return nil
		}
		encoded, _ := json.Marshal(sets.List(names.Insert(node)))
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[serverNamesKey] = string(encoded)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
