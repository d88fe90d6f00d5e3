package join

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"

	"k8s.io/client-go/kubernetes"
)

// removedServersKey, in k1m-cluster, lists the kube-apiserver addresses
// (host:port, as the kubernetes endpoints name them) of the servers
// `k1m server remove` took out of the cluster, as JSON, oldest first. An
// agent's load balancer keeps every server it has ever seen, whatever
// the endpoints say for a moment, and forgets one only when it is listed
// here. Agents read it where they already watch k1m-cluster: no request
// of its own. A server that joins again at the same address drops it
// from the list when it publishes (Publish).
const removedServersKey = "removedServers"

// MaxRemovedServers bounds the list: the newest are kept. An agent that
// was down through more removals than that keeps the older addresses,
// which only costs it a failed check now and then.
const MaxRemovedServers = 32

// RemovedServers is the list in k1m-cluster's data (none when it is
// missing or does not parse: forgetting nothing is the safe side).
func RemovedServers(data map[string]string) []string {
	var out []string
	if err := json.Unmarshal([]byte(data[removedServersKey]), &out); err != nil {
		return nil
	}
	return out
}

// withRemovedServers sets the list in data (deleting the key when empty),
// keeping the newest MaxRemovedServers.
func withRemovedServers(data map[string]string, list []string) {
	if len(list) > MaxRemovedServers {
		list = list[len(list)-MaxRemovedServers:]
	}
	if len(list) == 0 {
		delete(data, removedServersKey)
		return
	}
	encoded, _ := json.Marshal(list)
	data[removedServersKey] = string(encoded)
}

// ServerAddress is the host:port of a kube-apiserver URL, as the
// kubernetes endpoints and the agents' load balancers spell it.
func ServerAddress(apiURL string) (string, error) {
	u, err := url.Parse(apiURL)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		return "", fmt.Errorf("server URL %q: want https://HOST:PORT", apiURL)
	}
	return net.JoinHostPort(u.Hostname(), u.Port()), nil
}

// RecordRemovedServer adds address (host:port) to the removed servers in
// k1m-cluster, last (moved there when listed already).
func RecordRemovedServer(ctx context.Context, client kubernetes.Interface, address string) error {
	return updateSettingsConfigMap(ctx, client, func(data map[string]string) {
		list := slices.DeleteFunc(RemovedServers(data), func(a string) bool { return a == address })
		withRemovedServers(data, append(list, address))
		versions := ServerVersions(data)
		delete(versions, address)
		withServerVersions(data, versions)
	})
}

// updateSettingsConfigMap applies change to k1m-cluster's data, creating
// it if need be, again on a conflict: the servers publish it at every
// start, `k1m server remove` records removals in it.
func updateSettingsConfigMap(ctx context.Context, client kubernetes.Interface, change func(map[string]string)) error {
	return updateConfigMapData(ctx, client, PublicNamespace, SettingsName, func(data map[string]string) error { change(data); return nil })
}
