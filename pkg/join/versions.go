package join

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// serverVersionsKey, in k1m-cluster, holds the release each server runs,
// as JSON from its kube-apiserver address (host:port, as removedServers
// names it) to its version (v1.32.5+k1m.COMMIT). Each server writes its
// own at every start (Publish) and `k1m server remove` drops it
// (RecordRemovedServer). An agent checks its release against them when it
// joins or starts (pkg/version's CheckAgent), a server when it joins or
// starts (CheckServer): no request of their own, they read k1m-cluster
// then anyway.
const serverVersionsKey = "serverVersions"

// ServerVersions is the map in k1m-cluster's data (empty when it is
// missing or does not parse: nothing is checked then).
func ServerVersions(data map[string]string) map[string]string {
	out := map[string]string{}
	if err := json.Unmarshal([]byte(data[serverVersionsKey]), &out); err != nil {
		return map[string]string{}
	}
	return out
}

// withServerVersions sets the map in data (deleting the key when empty).
func withServerVersions(data map[string]string, versions map[string]string) {
	if len(versions) == 0 {
		delete(data, serverVersionsKey)
		return
	}
	encoded, _ := json.Marshal(versions)
	data[serverVersionsKey] = string(encoded)
}

// ReadServerVersions reads the servers' releases from k1m-cluster (none
// when it does not exist yet: the cluster's first start).
func ReadServerVersions(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	data, err := ReadPublished(ctx, client)
	if err != nil {
		return nil, err
	}
	return ServerVersions(data), nil
}

// ReadPublished reads k1m-cluster's data as the servers published it
// (nil when it does not exist yet: the cluster's first start), for a
// server that checks it before publishing again: one read for all it
// checks.
func ReadPublished(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	cm, err := client.CoreV1().ConfigMaps(PublicNamespace).Get(ctx, SettingsName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s/%s: %w", PublicNamespace, SettingsName, err)
	}
	return cm.Data, nil
}
