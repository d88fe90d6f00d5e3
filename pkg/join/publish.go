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
	"k1m.dev/k1m/pkg/pki"
)

// Publish writes (or updates) the bootstrap-token Secret, cluster-info and
// k1m-cluster. serverURL is the address agents should use.
func Publish(ctx context.Context, client kubernetes.Interface, caPEM []byte, serverURL string, token pki.Token, s Settings) error {
	info, err := clientcmd.Write(*kubeconfig.Build(serverURL, caPEM, "", kubeconfig.Credentials{}))
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + token.TokenID(), Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                       token.TokenID(),
			"token-secret":                   token.TokenSecret(),
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              BootstrapGroup,
			"description":                    "k1m agent join token (DATA-DIR/token)",
		},
	}
	if err := upsertSecret(ctx, client, secret); err != nil {
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

func upsertSecret(ctx context.Context, client kubernetes.Interface, s *corev1.Secret) error {
	_, err := client.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", s.Namespace, s.Name, err)
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
