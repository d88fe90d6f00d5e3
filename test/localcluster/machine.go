package localcluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k1m.dev/k1m/pkg/constants"
	"k1m.dev/k1m/test/localcluster/network"
)

// Every local cluster uses the same bridge, addresses, namespace names
// and API port, so only one can run on a machine at a time, whatever its
// ClusterDir and DataRoot.
var namespacePrefixes = []string{constants.LocalAgentPrefix, constants.LocalServerPrefix}

// refuseRunning fails when this cluster's servers run already.
func (c *Cluster) refuseRunning(context.Context) error {
	for _, s := range c.plan.Servers {
		if pid := runningPid(s.PidFile); pid != 0 {
			return fmt.Errorf("already running (%s, pid %d); make cluster-down first", s.Label(), pid)
		}
	}
	return nil
}

// checkMachineFree refuses while another cluster runs. A cluster whose
// processes are gone (killed, machine session ended) leaves its
// namespaces behind: those are removed; a live one is refused with what
// to do.
func (c *Cluster) checkMachineFree(context.Context) error {
	names, err := network.Namespaces(namespacePrefixes...)
	if err != nil {
		return err
	}
	for _, ns := range names {
		pids, err := network.Pids(ns)
		if err != nil {
			return err
		}
		if len(pids) > 0 {
			return fmt.Errorf("another k1m cluster is running: network namespace %s holds pids %s; stop it first (make cluster-down, or go run ./test/cmd/k1m-cluster down with that cluster's CLUSTER_DIR and DATA_ROOT)", ns, joinInts(pids))
		}
		if err := network.DeleteNamespace(ns); err != nil {
			return err
		}
		c.logf("removed network namespace %s left by a cluster that was not taken down (no process in it)", ns)
	}
	if listening(apiPort) {
		return fmt.Errorf("port %d is already in use (another k1m server or kube-apiserver?); stop it first (make cluster-down)", apiPort)
	}
	return nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}

// listening tells whether a TCP socket of the host's network namespace
// listens on port.
func listening(port int) bool {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, _ := os.ReadFile(table)
		if listensOn(string(data), port) {
			return true
		}
	}
	return false
}

// tcpListen is the state column of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// listensOn tells whether a /proc/net/tcp or tcp6 table holds a socket
// listening on port.
func listensOn(table string, port int) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
			return true
		}
	}
	return false
}

// setUpNetwork creates the bridge and every namespaced node's namespace,
// and lets the host route between them.
func (c *Cluster) setUpNetwork(context.Context) error {
	host, err := network.CurrentHost()
	if err != nil {
		return err
	}
	defer host.Close()
	if err := host.EnsureBridge(c.plan.Bridge); err != nil {
		return err
	}
	for _, n := range c.plan.namespaced() {
		ns := c.plan.namespace(n)
		// checkMachineFree left no cluster namespace, so a link of this
		// name outlived one (see network.Host.DeletePorts).
		if deleted, err := host.DeleteLink(ns.Veth); err != nil {
			return err
		} else if deleted {
			c.logf("deleted veth %s, left by an earlier %s that something outside the harness still held", ns.Veth, ns.Name)
		}
		if err := host.AddNamespace(c.plan.Bridge, ns); err != nil {
			return err
		}
	}
	return host.EnableIPv6Forwarding()
}

// deleteNamespaces deletes the cluster namespaces once their processes
// are gone. This cluster's processes are stopped, so its namespaces
// empty within seconds; one that still holds processes belongs to
// another cluster and is left to it. It tells whether one was left.
func (c *Cluster) deleteNamespaces() (busy bool, err error) {
	names, err := network.Namespaces(namespacePrefixes...)
	if err != nil {
		return false, err
	}
	for _, ns := range names {
		if !namespaceEmpties(ns, 10*time.Second) {
			c.logf("network namespace %s still holds processes (another cluster?); left as is", ns)
			busy = true
			continue
		}
		if err := network.DeleteNamespace(ns); err != nil {
			return busy, err
		}
	}
	return busy, nil
}

func namespaceEmpties(ns string, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(time.Second) {
		if pids, err := network.Pids(ns); err == nil && len(pids) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// deleteBridge deletes the bridge once the namespaces' veths have gone
// with them (within portsGrace), deleting any that has not, so that the
// next cluster finds every name free.
func (c *Cluster) deleteBridge() error {
	host, err := network.CurrentHost()
	if err != nil {
		return err
	}
	defer host.Close()
	for deadline := time.Now().Add(portsGrace); ; time.Sleep(100 * time.Millisecond) {
		ports, err := host.Ports(c.plan.Bridge.Name)
		if err != nil {
			return err
		}
		if len(ports) == 0 || time.Now().After(deadline) {
			break
		}
	}
	held, err := host.DeletePorts(c.plan.Bridge.Name)
	if len(held) > 0 {
		c.logf("deleted %s: still on bridge %s %s after their namespaces were deleted (something outside the harness holds a namespace)", strings.Join(held, ", "), c.plan.Bridge.Name, portsGrace)
	}
	if err != nil {
		return err
	}
	return host.DeleteBridge(c.plan.Bridge.Name)
}

// portsGrace is how long a deleted namespace's veth may take to go: the
// kernel tears a namespace down in the background, after its name is
// deleted and its last process has ended.
const portsGrace = 10 * time.Second
