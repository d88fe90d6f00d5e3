//go:build k1m_stock

package agent

import (
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// setRenewInterval does nothing in the stock build: the unpatched kubelet
// renews every quarter of its lease duration and has no such field.
func setRenewInterval(*kubeletv1beta1.KubeletConfiguration, time.Duration) {}
