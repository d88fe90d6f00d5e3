package join

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// Keys of ServerBootstrapName's data for the cluster's Secrets
// encryption key set (package serverbundle seals it with the cluster CA's
// key; package secretsenc defines it). A server reads the set at every
// start, straight from the durable etcd before its kube-apiserver starts
// (one read), and writes it back, with what it applied, once
// kube-apiserver serves (one or two writes per server start; nothing per
// node: the same at 100,000 nodes).
const (
	secretsKeysKey = "secrets-encryption"
	// secrets-encryption-applied.<node>: the key names that server runs
	// with (AppliedKeys, JSON; names are not secret).
	secretsAppliedPrefix = "secrets-encryption-applied."
)

// AppliedKeys is what one server's kube-apiserver runs with.
type AppliedKeys struct {
	Keys    []string `json:"keys"`
	Write   string   `json:"write"`
	Encrypt bool     `json:"encrypt"`
}

// Has tells whether the server reads with the key named name.
func (a AppliedKeys) Has(name string) bool {
	for _, k := range a.Keys {
		if k == name {
			return true
		}
	}
	return false
}

// SecretsKeysState is what the cluster records of its Secrets keys.
type SecretsKeysState struct {
	Sealed []byte // nil: no set yet
	// Applied is what each server ran with at its last start, by node;
	// Servers every server that published itself (a server of a build
	// before key sets has no Applied entry).
	Applied map[string]AppliedKeys
	Servers []string
}

func secretsKeysState(data map[string]string) SecretsKeysState {
	st := SecretsKeysState{Applied: map[string]AppliedKeys{}}
	if v, ok := data[secretsKeysKey]; ok {
		st.Sealed = []byte(v)
	}
	for k, v := range data {
		if node, ok := strings.CutPrefix(k, secretsAppliedPrefix); ok {
			var a AppliedKeys
			if json.Unmarshal([]byte(v), &a) == nil {
				st.Applied[node] = a
			}
		}
		if node, ok := strings.CutPrefix(k, serverKeyPrefix); ok {
			st.Servers = append(st.Servers, node)
		}
	}
	sort.Strings(st.Servers)
	return st
}

// ReadSecretsKeys reads what the cluster records of its Secrets keys
// through kube-apiserver.
func ReadSecretsKeys(ctx context.Context, client kubernetes.Interface) (SecretsKeysState, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, ServerBootstrapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return secretsKeysState(nil), nil
	case err != nil:
		return SecretsKeysState{}, err
	}
	return secretsKeysState(cm.Data), nil
}

// SecretsKeysKey is the etcd key of the ConfigMap that holds the sealed
// key set (kube-apiserver's default /registry prefix): in the durable etcd,
// or in the configmaps partition when the store has one.
const SecretsKeysKey = "/registry/configmaps/" + metav1.NamespaceSystem + "/" + ServerBootstrapName

// SecretsKeysFromEtcd reads the sealed key set straight from etcd (the
// store that holds SecretsKeysKey), for a server whose
// kube-apiserver is not started yet: it must start with the cluster's
// keys. nil: the cluster records none. serializable reads the member's
// own copy, which needs no quorum but may lag.
func SecretsKeysFromEtcd(ctx context.Context, cli *clientv3.Client, serializable bool) ([]byte, error) {
	key := SecretsKeysKey
	var opts []clientv3.OpOption
	if serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := cli.Get(ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("reading %s from etcd: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(resp.Kvs[0].Value, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding %s from etcd: %w", key, err)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("%s in etcd is a %T, not a ConfigMap", key, obj)
	}
	return secretsKeysState(cm.Data).Sealed, nil
}

// UpdateSecretsKeys changes the sealed key set under the ConfigMap's
// resourceVersion, again on a conflict (two servers starting at once, a
// rotation meanwhile: change sees the set as it is now). change gets the
// current sealed set (nil: none) and returns the next one (nil: keep); an
// error from it writes nothing. With node set, applied (from change's
// last run) is recorded for that server in the same write.
func UpdateSecretsKeys(ctx context.Context, client kubernetes.Interface, node string, change func(current []byte) (next []byte, applied AppliedKeys, err error)) error {
	return updateServerBootstrapChecked(ctx, client, func(data map[string]string) error {
		var current []byte
		if v, ok := data[secretsKeysKey]; ok {
			current = []byte(v)
		}
		next, applied, err := change(current)
		if err != nil {
			return err
		}
		if next != nil {
			data[secretsKeysKey] = string(next)
		}
		if node != "" {
			a, _ := json.Marshal(applied)
			data[secretsAppliedPrefix+node] = string(a)
		}
		return nil
	})
}
