// Package componentargs passes extra flags through to the components k1m
// runs (k3s's --kube-apiserver-arg and friends) for what k1m does not
// model, and keeps the list of flags k1m must own itself: those that wire
// the cluster together (the etcd servers, the certificates, the ranges
// every node agrees on) or that the patch series locks. A pass-through
// flag replaces k1m's value of the same flag, or is added; one that names
// an owned flag is refused.
package componentargs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Component names a component and the k1m flag that passes arguments to it.
type Component struct {
	Name string // e.g. kube-apiserver
	Flag string // e.g. --kube-apiserver-arg
	// owned maps each flag k1m sets itself to what to use instead.
	owned map[string]string
}

// The components, with the flags k1m owns for each.
var (
	APIServer = Component{Name: "kube-apiserver", Flag: "--kube-apiserver-arg", owned: map[string]string{
		"etcd-servers":                     "k1m runs the durable etcd",
		"etcd-servers-overrides":           "k1m puts Events and Leases in the no-fsync etcd",
		"etcd-cafile":                      "k1m keeps the etcd CA",
		"etcd-certfile":                    "k1m keeps the etcd client certificate",
		"etcd-keyfile":                     "k1m keeps the etcd client certificate",
		"secure-port":                      "use --https-listen-port",
		"bind-address":                     "use --bind-address",
		"advertise-address":                "use --advertise-address",
		"service-cluster-ip-range":         "use --service-cidr",
		"client-ca-file":                   "k1m keeps the cluster CA",
		"tls-cert-file":                    "k1m keeps kube-apiserver's serving certificate",
		"tls-private-key-file":             "k1m keeps kube-apiserver's serving certificate",
		"kubelet-certificate-authority":    "k1m keeps the kubelet serving CA",
		"kubelet-client-certificate":       "k1m keeps kube-apiserver's kubelet client certificate",
		"kubelet-client-key":               "k1m keeps kube-apiserver's kubelet client certificate",
		"requestheader-client-ca-file":     "k1m keeps the front-proxy CA",
		"proxy-client-cert-file":           "k1m keeps the front-proxy client certificate",
		"proxy-client-key-file":            "k1m keeps the front-proxy client certificate",
		"service-account-issuer":           "k1m derives it from --cluster-domain",
		"service-account-key-file":         "k1m keeps the service-account key",
		"service-account-signing-key-file": "k1m keeps the service-account key",
		"encryption-provider-config":       "use --secrets-encryption",
		"audit-policy-file":                "use --audit-policy-file",
		"audit-log-path":                   "use --audit-log-path",
		"enable-bootstrap-token-auth":      "k1m joins nodes with bootstrap tokens",
	}}
	ControllerManager = Component{Name: "kube-controller-manager", Flag: "--kube-controller-manager-arg", owned: map[string]string{
		"kubeconfig":                                      "k1m writes the controller-manager's kubeconfig",
		"cluster-cidr":                                    "use --cluster-cidr",
		"allocate-node-cidrs":                             "k1m's pod network needs node ranges",
		"node-cidr-mask-size-ipv6":                        "k1m cuts /64 node ranges",
		"service-cluster-ip-range":                        "use --service-cidr",
		"cluster-signing-cert-file":                       "k1m keeps the cluster CA",
		"cluster-signing-key-file":                        "k1m keeps the cluster CA",
		"cluster-signing-kubelet-serving-cert-file":       "k1m keeps the kubelet serving CA",
		"cluster-signing-kubelet-serving-key-file":        "k1m keeps the kubelet serving CA",
		"cluster-signing-kubelet-client-cert-file":        "k1m keeps the cluster CA",
		"cluster-signing-kubelet-client-key-file":         "k1m keeps the cluster CA",
		"cluster-signing-kube-apiserver-client-cert-file": "k1m keeps the cluster CA",
		"cluster-signing-kube-apiserver-client-key-file":  "k1m keeps the cluster CA",
		"cluster-signing-legacy-unknown-cert-file":        "k1m leaves the legacy-unknown signer off (certificates/v1 refuses it)",
		"cluster-signing-legacy-unknown-key-file":         "k1m leaves the legacy-unknown signer off (certificates/v1 refuses it)",
		"root-ca-file":                                    "k1m keeps the cluster CA",
		"service-account-private-key-file":                "k1m keeps the service-account key",
		"node-monitor-grace-period":                       "use --node-lease-renew-interval (the grace period follows it)",
		"node-lease-duration":                             "use --node-lease-renew-interval (the lease duration follows it)",
	}}
	Scheduler = Component{Name: "kube-scheduler", Flag: "--kube-scheduler-arg", owned: map[string]string{
		"kubeconfig":                "k1m writes the scheduler's kubeconfig",
		"authentication-kubeconfig": "k1m writes the scheduler's kubeconfig",
		"authorization-kubeconfig":  "k1m writes the scheduler's kubeconfig",
		"config":                    "k1m writes the scheduler's configuration file (--scheduler-percentage-of-nodes-to-score; kube-api-qps, kube-api-burst, profiling and the scheduler's other deprecated flags given here are put into it)",
		"write-config-to":           "k1m runs the scheduler, which would write its configuration and exit",
	}}
	Kubelet = Component{Name: "kubelet", Flag: "--kubelet-arg", owned: map[string]string{
		"config":                     "k1m writes the kubelet's configuration",
		"kubeconfig":                 "k1m keeps the node's credentials",
		"bootstrap-kubeconfig":       "k1m joins with --token",
		"cert-dir":                   "k1m keeps the node's credentials",
		"hostname-override":          "use --node-name",
		"node-ip":                    "use --node-ip",
		"cluster-dns":                "the server decides it (k1m-cluster)",
		"cluster-domain":             "the server decides it (use the server's --cluster-domain)",
		"node-lease-renew-interval":  "the server decides it (use the server's --node-lease-renew-interval)",
		"container-runtime-endpoint": "k1m runs the node's containerd",
	}}
	KubeProxy = Component{Name: "kube-proxy", Flag: "--kube-proxy-arg", owned: map[string]string{
		"kubeconfig":        "k1m keeps the node's credentials",
		"hostname-override": "use --node-name",
		"cluster-cidr":      "the server decides it (use the server's --cluster-cidr)",
		"proxy-mode":        "use --proxy-mode",
	}}
)

// Arg is one pass-through flag.
type Arg struct{ Name, Value string }

var flagName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Form is the valid form of one pass-through value, for errors.
const Form = "name=value, the component's flag name without dashes, e.g. --kube-apiserver-arg=max-requests-inflight=800"

// Parse checks the values given to c's pass-through flag. Every problem
// is reported, each naming the flag and the value.
func (c Component) Parse(values []string) ([]Arg, error) {
	var args []Arg
	var problems []string
	for _, v := range values {
		name, value, ok := strings.Cut(strings.TrimPrefix(v, "--"), "=")
		switch {
		case !ok || !flagName.MatchString(name):
			problems = append(problems, fmt.Sprintf("%s %q: want %s", c.Flag, v, Form))
		case c.owned[name] != "":
			problems = append(problems, fmt.Sprintf("%s %q collides with --%s, which k1m sets for %s itself: %s", c.Flag, v, name, c.Name, c.owned[name]))
		default:
			if err := c.lockedByTheSeries(name, value); err != nil {
				problems = append(problems, fmt.Sprintf("%s %q: %v", c.Flag, v, err))
				continue
			}
			args = append(args, Arg{Name: name, Value: value})
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return args, nil
}

// lockedByTheSeries refuses what patch 0001 locks (the B-tree watch
// cache: the hashmap store is what k1m is measured with) and what would
// switch off NodeRestriction, which keeps a node's credentials to its own
// Node, Pods and Lease: --enable-admission-plugins replaces k1m's list, so
// one without NodeRestriction would drop it without a word.
func (c Component) lockedByTheSeries(name, value string) error {
	if c.Name != APIServer.Name {
		return nil
	}
	list := strings.Split(value, ",")
	has := func(item string) bool {
		return slices.ContainsFunc(list, func(s string) bool { return strings.TrimSpace(s) == item })
	}
	switch name {
	case "feature-gates":
		for _, gate := range list {
			if g, v, _ := strings.Cut(strings.TrimSpace(gate), "="); g == "BtreeWatchCache" && strings.TrimSpace(v) != "false" {
				return fmt.Errorf("collides with --feature-gates=BtreeWatchCache=false, which k1m's patch 0001 locks (the watch cache is the hashmap store)")
			}
		}
	case "enable-admission-plugins":
		if !has(NodeRestriction) {
			return fmt.Errorf("drops %s, which k1m always enables (it keeps a node's credentials to its own Node, Pods and Lease): list it too, e.g. --kube-apiserver-arg=enable-admission-plugins=%s,%s", NodeRestriction, NodeRestriction, value)
		}
	case "disable-admission-plugins":
		if has(NodeRestriction) {
			return fmt.Errorf("disables %s, which k1m always enables (it keeps a node's credentials to its own Node, Pods and Lease)", NodeRestriction)
		}
	}
	return nil
}

// NodeRestriction is the admission plugin no pass-through flag may drop.
const NodeRestriction = "NodeRestriction"

// Merge returns base with each pass-through flag applied: a flag k1m set
// gets the given value in place, any other is added at the end. base holds
// --name=value elements; several values for one name are kept in order.
func Merge(base []string, extra []Arg) []string {
	out := slices.Clone(base)
	replaced := map[string]bool{}
	for _, a := range extra {
		flag := "--" + a.Name + "=" + a.Value
		i := slices.IndexFunc(out, func(s string) bool { return strings.HasPrefix(s, "--"+a.Name+"=") })
		switch {
		case i >= 0 && !replaced[a.Name]:
			// The first pass-through value of a name replaces every value
			// k1m set; later ones add to it.
			out = slices.DeleteFunc(out, func(s string) bool { return strings.HasPrefix(s, "--"+a.Name+"=") })
			out = slices.Insert(out, i, flag)
		default:
			out = append(out, flag)
		}
		replaced[a.Name] = true
	}
	return out
}
