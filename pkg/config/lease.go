package config

import (
	"fmt"
	"time"
)

// LeaseProfile is the one set of node-lease timings a cluster runs with.
// k1m derives it from the renew interval so the kubelets' renew interval
// and lease duration and the controller-manager's grace period never
// disagree.
type LeaseProfile struct {
	RenewInterval time.Duration // kubelet --node-lease-renew-interval
	LeaseDuration time.Duration // kubelet nodeLeaseDurationSeconds, controller-manager --node-lease-duration
	GracePeriod   time.Duration // controller-manager --node-monitor-grace-period
}

// DefaultRenewInterval is upstream's fixed interval.
const DefaultRenewInterval = 10 * time.Second

// LeaseProfileFor derives the profile from the renew interval with
// upstream's ratios: the lease lasts four intervals (10s -> 40s) and a node
// is marked unhealthy one interval after its lease would expire (50s).
func LeaseProfileFor(renew time.Duration) (LeaseProfile, error) {
	if renew < time.Second || renew%time.Second != 0 {
		return LeaseProfile{}, fmt.Errorf("--node-lease-renew-interval %v: want a whole number of seconds, at least 1s, e.g. 10s (upstream) or 30s (a third of the Lease writes)", renew)
	}
	if renew > MaxRenewInterval {
		return LeaseProfile{}, fmt.Errorf("--node-lease-renew-interval %v: want at most %v: a node is declared NotReady five intervals after its last renewal (%v at the most)", renew, MaxRenewInterval, 5*MaxRenewInterval)
	}
	lease := 4 * renew
	return LeaseProfile{RenewInterval: renew, LeaseDuration: lease, GracePeriod: lease + renew}, nil
}

// LeaseDurationSeconds is the kubelet's nodeLeaseDurationSeconds.
func (p LeaseProfile) LeaseDurationSeconds() int32 {
	return int32(p.LeaseDuration / time.Second)
}
