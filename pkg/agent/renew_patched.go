//go:build !k1m_stock

package agent

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// setRenewInterval sets the kubelet's renew interval, a field patch 0003
// adds to the KubeletConfiguration.
func setRenewInterval(c *kubeletv1beta1.KubeletConfiguration, d time.Duration) {
	c.NodeLeaseRenewInterval = metav1.Duration{Duration: d}
}
