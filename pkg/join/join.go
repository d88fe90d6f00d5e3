// Package join is how an agent joins a k1m cluster with a token, both
// sides. The server publishes, in kube-public, the cluster-info ConfigMap
// (the CA, readable anonymously, as kubeadm does) and k1m-cluster (the
// settings every agent must share, readable with the token), and stores
// the token's secret as a bootstrap-token Secret. The agent downloads the
// CA over unverified TLS, trusts it only if its hash is the one in the
// token, then reads k1m-cluster over verified TLS with the token.
package join

import (
	"fmt"
	"strconv"
	"time"

	"k1m.dev/k1m/pkg/constants"
)

// Names of the published objects.
const (
	PublicNamespace = "kube-public"
	ClusterInfoName = "cluster-info" // kubeadm's name and layout
	SettingsName    = "k1m-cluster"
	// BootstrapGroup is the extra group of k1m's bootstrap tokens; RBAC in
	// manifests/ lets it read SettingsName and request node certificates.
	BootstrapGroup = "system:bootstrappers:k1m:default-node-token"
)

// Settings are what every node of a cluster must agree on, decided by the
// server and read by agents.
type Settings struct {
	RenewInterval        time.Duration // kubelet --node-lease-renew-interval
	LeaseDurationSeconds int32         // kubelet nodeLeaseDurationSeconds
	ClusterDomain        string
	ClusterDNS           string // the CoreDNS Service IP
	ClusterCIDR          string
	ServiceCIDR          string
	// RestartSpread is how long the agents' restarts for a new lease
	// profile are spread over: each waits a random part of it (0: none;
	// absent in the data of earlier releases).
	RestartSpread time.Duration
	// RebalanceSpread is how long the agents' moves back to a server
	// that returned to the list are spread over, when it is longer than
	// their own delay (0: absent, their own; loadbalancer.Config
	// RebalanceDelay).
	RebalanceSpread time.Duration
	// SlowestInFlight is the slowest renew interval a node could still run
	// with when the last lease profile change was published: the interval
	// published before it, or a slower one a Ready node's annotation showed
	// then. A server believes a node's renew interval annotation (which
	// the node writes itself) only up to this or RenewInterval, whichever
	// is longer. 0: no bound beyond RenewInterval (absent in the data of
	// earlier releases, and before any change).
	SlowestInFlight time.Duration
	// PodRoutes says who routes each node's pod range: k1m's route
	// publisher and the nodes, or the provider's network (absent in the
	// data of earlier releases: k1m).
	PodRoutes constants.PodRoutes
}

// podRoutesKey is PodRoutes's key in the data.
const podRoutesKey = "podRoutes"

// slowestInFlightKey is SlowestInFlight's key in the data, written only
// when there is a bound.
const slowestInFlightKey = "leaseChangeSlowestInFlight"

// rebalanceSpreadKey holds Settings.RebalanceSpread, written only when
// above 0.
const rebalanceSpreadKey = "rebalanceSpread"

// Data renders s as ConfigMap data.
func (s Settings) Data() map[string]string {
	d := map[string]string{
		"nodeLeaseRenewInterval":   s.RenewInterval.String(),
		"nodeLeaseDurationSeconds": strconv.Itoa(int(s.LeaseDurationSeconds)),
		"clusterDomain":            s.ClusterDomain,
		"clusterDNS":               s.ClusterDNS,
		"clusterCIDR":              s.ClusterCIDR,
		"serviceCIDR":              s.ServiceCIDR,
		"leaseChangeRestartSpread": s.RestartSpread.String(),
		podRoutesKey:               string(s.PodRoutes),
	}
	if s.SlowestInFlight > 0 {
		d[slowestInFlightKey] = s.SlowestInFlight.String()
	}
	if s.RebalanceSpread > 0 {
		d[rebalanceSpreadKey] = s.RebalanceSpread.String()
	}
	return d
}

// SettingsFromData parses ConfigMap data.
func SettingsFromData(d map[string]string) (Settings, error) {
	renew, err := time.ParseDuration(d["nodeLeaseRenewInterval"])
	if err != nil {
		return Settings{}, fmt.Errorf("%s/%s: nodeLeaseRenewInterval %q: %v", PublicNamespace, SettingsName, d["nodeLeaseRenewInterval"], err)
	}
	lease, err := strconv.Atoi(d["nodeLeaseDurationSeconds"])
	if err != nil || lease <= 0 {
		return Settings{}, fmt.Errorf("%s/%s: nodeLeaseDurationSeconds %q: want a positive number of seconds", PublicNamespace, SettingsName, d["nodeLeaseDurationSeconds"])
	}
	s := Settings{RenewInterval: renew, LeaseDurationSeconds: int32(lease), ClusterDomain: d["clusterDomain"],
		ClusterDNS: d["clusterDNS"], ClusterCIDR: d["clusterCIDR"], ServiceCIDR: d["serviceCIDR"]}
	if v, ok := d["leaseChangeRestartSpread"]; ok {
		if s.RestartSpread, err = time.ParseDuration(v); err != nil || s.RestartSpread < 0 {
			return Settings{}, fmt.Errorf("%s/%s: leaseChangeRestartSpread %q: want a duration, 0s or more", PublicNamespace, SettingsName, v)
		}
	}
	if v, ok := d[rebalanceSpreadKey]; ok {
		if s.RebalanceSpread, err = time.ParseDuration(v); err != nil || s.RebalanceSpread <= 0 {
			return Settings{}, fmt.Errorf("%s/%s: %s %q: want a duration above 0s", PublicNamespace, SettingsName, rebalanceSpreadKey, v)
		}
	}
	if v, ok := d[slowestInFlightKey]; ok {
		if s.SlowestInFlight, err = time.ParseDuration(v); err != nil || s.SlowestInFlight <= 0 {
			return Settings{}, fmt.Errorf("%s/%s: %s %q: want a duration above 0s", PublicNamespace, SettingsName, slowestInFlightKey, v)
		}
	}
	if s.PodRoutes, err = PodRoutesOf(d); err != nil {
		return Settings{}, err
	}
	for k, v := range map[string]string{"clusterDomain": s.ClusterDomain, "clusterDNS": s.ClusterDNS, "clusterCIDR": s.ClusterCIDR, "serviceCIDR": s.ServiceCIDR} {
		if v == "" {
			return Settings{}, fmt.Errorf("%s/%s: %s is empty", PublicNamespace, SettingsName, k)
		}
	}
	return s, nil
}

// PodRoutesOf reads who routes the pod ranges from k1m-cluster's data:
// k1m when the key is absent (data an earlier release wrote, or none).
func PodRoutesOf(d map[string]string) (constants.PodRoutes, error) {
	v, ok := d[podRoutesKey]
	if !ok {
		return constants.PodRoutesK1m, nil
	}
	routes, valid := constants.ParsePodRoutes(v)
	if !valid {
		return "", fmt.Errorf("%s/%s: %s %q: want %s", PublicNamespace, SettingsName, podRoutesKey, v, constants.PodRoutesForms())
	}
	return routes, nil
}
