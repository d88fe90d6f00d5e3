package join

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"k1m.dev/k1m/pkg/kubeconfig"
)

// Publish writes (or updates) cluster-info and k1m-cluster. serverURL is
// the address agents should use. Join tokens are kept apart (tokens.go):
// publishing again at every start must not bring back a deleted token.
func Publish(ctx context.Context, client kubernetes.Interface, caPEM []byte, serverURL string, s Settings) error {
	info, err := clientcmd.Write(*kubeconfig.Build(serverURL, caPEM, "", kubeconfig.Credentials{}))
	if err != nil {
		return err
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: ClusterInfoName, Namespace: PublicNamespace}, Data: map[string]string{"kubeconfig": string(info)}},
		{ObjectMeta: metav1.ObjectMeta{Name: SettingsName, Namespace: PublicNamespace}, Data: s.Data()},
	} {
		if err := upsertConfigMap(ctx, client, cm); err != nil {
			return err
		}
	}
	return nil
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
