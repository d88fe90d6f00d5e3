package join

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/pkg/pki"
	"k1m.dev/k1m/pkg/serverbundle"
)

// A server joins a cluster the way an agent does (the token pins the CA),
// then reads ServerBootstrapName: the files every server shares, sealed
// with the seal of the server token (package bootstrap), and where each
// server's etcds serve. It lives in kube-system; RBAC (manifests/) lets the
// bootstrap group read it, so any join token reads it, but only the
// server token's seal, which the cluster never stores, opens the bundle.
const ServerBootstrapName = constants.ServerBootstrapName

// Keys of ServerBootstrapName's data.
const (
	bundleKeyPrefix = "bundle." // bundle.<seal ID>: the sealed bundle; one at a time
	// token.<token ID>: a bundle sealed with a join token's secret, which
	// the cluster stores; written before 2026-11-25, deleted on sight.
	legacyKeyPrefix = "token."
	etcdKeyPrefix   = "durable-etcd." // durable-etcd.<node>: that server's durable etcd client URL
	serverKeyPrefix = "server."       // server.<node>: that server's kube-apiserver URL
	datastoreKey    = "datastore"     // the external etcd of each store (Datastore, JSON), the same from every server
	// The kubelet serving CA's certificate (public), set by the first
	// server that publishes: what a server upgraded from a build before
	// that CA compares its own with.
	kubeletServingCAKey = "kubelet-serving-ca.crt"
)

// Datastore names the external etcd members of each store; none: the
// servers' embedded etcds hold that store.
type Datastore struct {
	Durable []string `json:"durable,omitempty"`
	// The JSON name is the one earlier releases write and read: servers of
	// two releases share this record during a rolling upgrade.
	NoFsync []string `json:"ephemeral,omitempty"`
	// Partitions are the external etcd members of each store partition,
	// by its name (beside an external durable store only).
	Partitions map[string][]string `json:"partitions,omitempty"`
}

// ServerBootstrap is what a joining server reads.
type ServerBootstrap struct {
	Sealed []byte // the bundle sealed for the token it joins with
	// DurableEtcd are the client URLs the servers' durable etcds
	// advertised when they last started, by server name.
	DurableEtcd map[string]string
	// Datastore is where the cluster keeps its stores.
	Datastore Datastore
}

// DurableEtcdURLs lists DurableEtcd's URLs, sorted.
func (b ServerBootstrap) DurableEtcdURLs() []string {
	var out []string
	for _, u := range b.DurableEtcd {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// ErrSealRotated says the cluster's bundle is sealed with another server
// token's seal: the server token was rotated on another server, and this
// server's seal no longer opens the bundle the cluster stores (a copy made
// before the rotation it still opens: the CA keys in it are unchanged).
var ErrSealRotated = errors.New("the cluster's server token was rotated on another server: this server's DATA-DIR/server-token no longer opens the bundle the cluster stores")

// PublishServer records, for a server of a multi-server cluster, its
// kube-apiserver URL, the cluster's datastore and, unless it runs no
// durable etcd (durableEtcdURL empty), where its durable etcd serves; and,
// when sealed is given, the bundle under sealID, unless the cluster
// publishes it under another seal (ErrSealRotated: the rest is recorded,
// the bundle is not brought back under an old seal). Bundles sealed with a
// join token's secret are deleted. Each server changes only its own keys,
// read and written under the ConfigMap's resourceVersion, so servers
// starting at once, or a rotation meanwhile, are not undone.
func PublishServer(ctx context.Context, client kubernetes.Interface, sealID string, sealed []byte, node, apiURL, durableEtcdURL string, datastore Datastore) error {
	stores, _ := json.Marshal(datastore)
	mine := map[string]string{serverKeyPrefix + node: apiURL, datastoreKey: string(stores)}
	if durableEtcdURL != "" {
		mine[etcdKeyPrefix+node] = durableEtcdURL
	}
	var rotated bool
	err := updateServerBootstrap(ctx, client, func(data map[string]string) {
		dropLegacy(data)
		maps.Copy(data, mine)
		rotated = false
		if sealed == nil {
			return
		}
		for k := range data {
			if strings.HasPrefix(k, bundleKeyPrefix) && k != bundleKeyPrefix+sealID {
				rotated = true
				return
			}
		}
		data[bundleKeyPrefix+sealID] = string(sealed)
	})
	if err == nil && rotated {
		err = ErrSealRotated
	}
	return err
}

// ReplaceBundle publishes sealed under sealID as the cluster's one bundle:
// every other (an older seal's, a join token's) is deleted in the same
// write, so from then on the old server token opens no bundle the cluster
// stores. It cannot reach a copy made before (read from this ConfigMap,
// or in an etcd snapshot), which the old seal still opens.
func ReplaceBundle(ctx context.Context, client kubernetes.Interface, sealID string, sealed []byte) error {
	return updateServerBootstrap(ctx, client, func(data map[string]string) {
		dropLegacy(data)
		for k := range data {
			if strings.HasPrefix(k, bundleKeyPrefix) {
				delete(data, k)
			}
		}
		data[bundleKeyPrefix+sealID] = string(sealed)
	})
}

func dropLegacy(data map[string]string) {
	for k := range data {
		if strings.HasPrefix(k, legacyKeyPrefix) {
			delete(data, k)
		}
	}
}

// updateServerBootstrap applies change to ServerBootstrapName's data,
// creating it if need be, again on a conflict.
func updateServerBootstrap(ctx context.Context, client kubernetes.Interface, change func(map[string]string)) error {
	return updateServerBootstrapChecked(ctx, client, func(data map[string]string) error { change(data); return nil })
}

// updateServerBootstrapChecked is updateServerBootstrap with a change that
// may refuse (nothing is written then, and its error is returned).
func updateServerBootstrapChecked(ctx context.Context, client kubernetes.Interface, change func(map[string]string) error) error {
	return updateConfigMapData(ctx, client, metav1.NamespaceSystem, ServerBootstrapName, change)
}

// errChange marks an error of the change itself: returned as it is, with
// nothing written.
type errChange struct{ err error }

func (e errChange) Error() string { return e.err.Error() }

// updateConfigMapData applies change to the data of ConfigMap
// namespace/name, creating it if need be, again on a conflict. A change
// that returns an error writes nothing, and its error is returned as is.
func updateConfigMapData(ctx context.Context, client kubernetes.Interface, namespace, name string, change func(map[string]string) error) error {
	cms := client.CoreV1().ConfigMaps(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			data := map[string]string{}
			if err := change(data); err != nil {
				return errChange{err}
			}
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: data}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if err := change(cm.Data); err != nil {
			return errChange{err}
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	var refused errChange
	if errors.As(err, &refused) {
		return refused.err
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", namespace, name, err)
	}
	return nil
}

// ServerKnown tells whether a server called node has published itself.
func ServerKnown(ctx context.Context, client kubernetes.Interface, node string) (bool, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, ServerBootstrapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	_, server := cm.Data[serverKeyPrefix+node]
	_, etcd := cm.Data[etcdKeyPrefix+node]
	return server || etcd, nil
}

// ForgetServer deletes a removed server's keys.
func ForgetServer(ctx context.Context, client kubernetes.Interface, node string) error {
	patch, _ := json.Marshal(map[string]any{"data": map[string]any{etcdKeyPrefix + node: nil, serverKeyPrefix + node: nil, secretsAppliedPrefix + node: nil}})
	_, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Patch(ctx, ServerBootstrapName, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing %s from ConfigMap %s/%s: %w", node, metav1.NamespaceSystem, ServerBootstrapName, err)
	}
	return nil
}

// FetchServerBootstrap reads the server bootstrap of the cluster at
// serverURL with token, trusting only caPEM (which Discover checked
// against the token). Every error is an *Error naming the input to fix.
func FetchServerBootstrap(ctx context.Context, serverURL string, caPEM []byte, token pki.Token) (ServerBootstrap, error) {
	pool, err := token.VerifyCA(caPEM)
	if err != nil {
		return ServerBootstrap{}, &Error{InputToken, err}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, serverURL+"/api/v1/namespaces/kube-system/configmaps/"+ServerBootstrapName, nil)
	if err != nil {
		return ServerBootstrap{}, serverError("%v", err)
	}
	req.Header.Set("Authorization", "Bearer "+token.Secret)
	resp, err := client.Do(req)
	if err != nil {
		return ServerBootstrap{}, serverError("cannot reach kube-apiserver (%v)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return ServerBootstrap{}, tokenError("the server refused the token (401 Unauthorized): it is mistyped, expired or deleted")
	case http.StatusNotFound:
		return ServerBootstrap{}, serverError("%w (no %s/%s): start the first server with --cluster-init (a lone server's data can be restarted with it)", ErrNotPublished, metav1.NamespaceSystem, ServerBootstrapName)
	default:
		return ServerBootstrap{}, serverError("reading %s/%s: HTTP %d: %s", metav1.NamespaceSystem, ServerBootstrapName, resp.StatusCode, truncate(body))
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(body, &cm); err != nil {
		return ServerBootstrap{}, serverError("%s/%s is not a ConfigMap: %v", metav1.NamespaceSystem, ServerBootstrapName, err)
	}
	return parseServerBootstrap(cm.Data, token)
}

// ErrNotPublished says the server publishes no server bootstrap: it is not
// a server of a multi-server cluster, or not yet (a first server started
// with --cluster-init publishes it once its kube-apiserver is up).
var ErrNotPublished = errors.New("it is not a server of a multi-server cluster")

// ErrNotServerToken says the token joins agents only.
var ErrNotServerToken = errors.New("not a server token")

func parseServerBootstrap(data map[string]string, token pki.Token) (ServerBootstrap, error) {
	if !token.IsServerToken() {
		return ServerBootstrap{}, &Error{InputToken, fmt.Errorf("%w: token %s is a join token for agents (it has no seal): join servers with a server's DATA-DIR/server-token", ErrNotServerToken, token.TokenID())}
	}
	out := ServerBootstrap{DurableEtcd: map[string]string{}}
	for k, v := range data {
		if node, ok := strings.CutPrefix(k, etcdKeyPrefix); ok {
			out.DurableEtcd[node] = v
		}
	}
	if stores, ok := data[datastoreKey]; ok {
		if err := json.Unmarshal([]byte(stores), &out.Datastore); err != nil {
			return ServerBootstrap{}, serverError("%s/%s: %s %q: %v", metav1.NamespaceSystem, ServerBootstrapName, datastoreKey, stores, err)
		}
	}
	sealed, ok := data[bundleKeyPrefix+serverbundle.SealID(token.Seal)]
	if !ok {
		return ServerBootstrap{}, &Error{InputToken, missingBundle(data)}
	}
	if len(out.DurableEtcd) == 0 && len(out.Datastore.Durable) == 0 {
		return ServerBootstrap{}, serverError("%s/%s names no server's etcd: is the first server running with --cluster-init?", metav1.NamespaceSystem, ServerBootstrapName)
	}
	out.Sealed = []byte(sealed)
	return out, nil
}

// PublishedServers lists the kube-apiserver URL each server of a
// multi-server cluster published, by its node name (none for a lone
// server).
func PublishedServers(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, ServerBootstrapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return map[string]string{}, nil
	case err != nil:
		return nil, err
	}
	out := map[string]string{}
	for k, v := range cm.Data {
		if node, ok := strings.CutPrefix(k, serverKeyPrefix); ok {
			out[node] = v
		}
	}
	return out, nil
}

// missingBundle says why no bundle is published for a server token's seal.
func missingBundle(data map[string]string) error {
	for k := range data {
		if strings.HasPrefix(k, bundleKeyPrefix) {
			return errors.New("its seal is not the cluster's (the server token was rotated, k1m token rotate): use DATA-DIR/server-token of the server it was rotated on")
		}
	}
	return errors.New("no server has published the shared files for a server token yet (the servers run a build from before 2026-11-25): restart one server with this build, then join with its DATA-DIR/server-token")
}

// BundlePublished tells whether the cluster publishes its bundle under
// sealID, and whether it publishes one at all.
func BundlePublished(ctx context.Context, client kubernetes.Interface, sealID string) (underID, any bool, err error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, ServerBootstrapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, false, nil
	case err != nil:
		return false, false, err
	}
	for k := range cm.Data {
		if strings.HasPrefix(k, bundleKeyPrefix) {
			any = true
			underID = underID || k == bundleKeyPrefix+sealID
		}
	}
	return underID, any, nil
}

// ClaimKubeletServingCA records certPEM as the cluster's kubelet serving CA
// when none is recorded, and returns the one recorded.
func ClaimKubeletServingCA(ctx context.Context, client kubernetes.Interface, certPEM []byte) ([]byte, error) {
	var recorded string
	err := updateServerBootstrap(ctx, client, func(data map[string]string) {
		if data[kubeletServingCAKey] == "" {
			data[kubeletServingCAKey] = string(certPEM)
		}
		recorded = data[kubeletServingCAKey]
	})
	return []byte(recorded), err
}
