//go:build !k1m_stock

package server

import (
	"k8s.io/component-base/runtimetuning"
	"k8s.io/klog/v2"
)

// runtimeTuning applies patch 0002 again, now that the server runs under
// its limit: GOMEMLIMIT follows the limit, not the whole machine.
func runtimeTuning() error {
	r, err := runtimetuning.DefaultConfig().Apply()
	if err != nil {
		return err
	}
	klog.InfoS("Go runtime tuning", "result", r.String())
	return nil
}
