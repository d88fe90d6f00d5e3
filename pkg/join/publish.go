package join

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/kubeconfig"
)

// Publish writes (or updates) cluster-info and k1m-cluster. serverURL is
// the address agents should use, the publishing server's own. Join tokens
// are kept apart (tokens.go): publishing again at every start must not
// bring back a deleted token. k1m-cluster keeps its removed servers
// (removed.go), but for this server's own address: a server that joins
// again where a removed one was is no longer removed, and the releases
// the servers run (versions.go), this server's own set to release.
func Publish(ctx context.Context, client kubernetes.Interface, caPEM []byte, serverURL, release string, s Settings) error {
	info, err := clientcmd.Write(*kubeconfig.Build(serverURL, caPEM, "", kubeconfig.Credentials{}))
	if err != nil {
		return err
	}
	own, err := ServerAddress(serverURL)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ClusterInfoName, Namespace: PublicNamespace}, Data: map[string]string{"kubeconfig": string(info)}}
	if err := upsertConfigMap(ctx, client, cm); err != nil {
		return err
	}
	return updateSettingsConfigMap(ctx, client, func(data map[string]string) {
		removed := slices.DeleteFunc(RemovedServers(data), func(a string) bool { return a == own })
		versions := ServerVersions(data)
		versions[own] = release
		if release == "" { // unknown: nothing to check against
			delete(versions, own)
		}
		clear(data)
		maps.Copy(data, s.Data())
		withRemovedServers(data, removed)
		withServerVersions(data, versions)
	})
}

func upsertConfigMap(ctx context.Context, client kubernetes.Interface, cm *corev1.ConfigMap) error {
	_, err := client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}
