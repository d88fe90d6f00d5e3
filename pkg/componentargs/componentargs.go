// Package componentargs passes extra flags through to the components k1m
// runs (k3s's --kube-apiserver-arg and friends) for what k1m does not
// model, and keeps the list of flags k1m must own itself: those that wire
// the cluster together (the etcd servers, the certificates, the ranges
// every node agrees on) or that the patch series locks. A pass-through
// flag replaces k1m's value of the same flag, or is added; one that names
// an owned flag is refused.
//
// No pass-through flag may weaken how a request is authenticated or
// authorized, since a node must prove and reach only itself: kube-apiserver
// keeps the Node and RBAC authorizers (and never AlwaysAllow), its
// anonymous requests as the join needs them, and NodeRestriction; a
// kubelet keeps refusing anonymous requests, asking kube-apiserver to
// authorize each one (Webhook), its read-only port closed and the cluster
// CA. Each is refused when the flags are parsed, before anything starts,
// naming the flag, the value, why, and the valid form.
package componentargs

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
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
		"client-ca-file":             "k1m keeps the cluster CA (the kubelet verifies kube-apiserver's client certificate with it)",
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
			if err := c.locked(name, value); err != nil {
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

// locked refuses a value that would undo what k1m locks: what the patch
// series locks, and how a request is authenticated and authorized.
func (c Component) locked(name, value string) error {
	switch c.Name {
	case APIServer.Name:
		if err := lockedByTheSeries(name, value); err != nil {
			return err
		}
		return apiserverAuthLocked(name, value)
	case Kubelet.Name:
		return kubeletAuthLocked(name, value)
	}
	return nil
}

// lockedByTheSeries refuses what patch 0001 locks (the B-tree watch
// cache: the hashmap store is what k1m is measured with) and what would
// switch off NodeRestriction, which keeps a node's credentials to its own
// Node, Pods and Lease: --enable-admission-plugins replaces k1m's list, so
// one without NodeRestriction would drop it without a word.
func lockedByTheSeries(name, value string) error {
	list := splitList(value)
	switch name {
	case "feature-gates":
		for _, gate := range list {
			if g, v, _ := strings.Cut(gate, "="); g == "BtreeWatchCache" && strings.TrimSpace(v) != "false" {
				return errors.New("collides with --feature-gates=BtreeWatchCache=false, which k1m's patch 0001 locks (the watch cache is the hashmap store)")
			}
		}
	case "enable-admission-plugins":
		if !slices.Contains(list, NodeRestriction) {
			return fmt.Errorf("drops %s, which k1m always enables (it keeps a node's credentials to its own Node, Pods and Lease): list it too, e.g. --kube-apiserver-arg=enable-admission-plugins=%s,%s", NodeRestriction, NodeRestriction, value)
		}
	case "disable-admission-plugins":
		if slices.Contains(list, NodeRestriction) {
			return fmt.Errorf("disables %s, which k1m always enables (it keeps a node's credentials to its own Node, Pods and Lease)", NodeRestriction)
		}
		if slices.Contains(list, ValidatingAdmissionPolicy) {
			return fmt.Errorf("disables %s, which k1m relies on (its policy k1m-node-pod-ranges keeps nodes from writing their own pod ranges, which every node routes)", ValidatingAdmissionPolicy)
		}
	}
	return nil
}

// splitList splits a comma-separated flag value into trimmed items.
func splitList(value string) []string {
	list := strings.Split(value, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	return list
}

// NodeRestriction is the admission plugin no pass-through flag may drop.
const NodeRestriction = "NodeRestriction"

// ValidatingAdmissionPolicy is the admission plugin that enforces k1m's
// policies (manifests/node-pod-ranges.yaml); on by default, it may not be
// disabled either.
const ValidatingAdmissionPolicy = "ValidatingAdmissionPolicy"

// The authorizers kube-apiserver always runs (k1m passes
// --authorization-mode=Node,RBAC), and the one it never runs.
const (
	nodeAuthorizer = "Node"
	rbacAuthorizer = "RBAC"
	alwaysAllow    = "AlwaysAllow"
	// authorizers says why k1m keeps both.
	authorizers = "Node keeps a node's credentials to its own Node, Lease and what its own pods use; RBAC gives everyone else what their roles grant"
)

// apiserverAuthLocked refuses a kube-apiserver flag that would weaken
// authorization (an --authorization-mode without Node or RBAC, or with
// AlwaysAllow; an --authorization-config, which replaces the mode list)
// or change anonymous requests, which the join needs as they are.
func apiserverAuthLocked(name, value string) error {
	switch name {
	case "authorization-mode":
		return checkAuthorizationMode(value)
	case "authorization-config":
		return fmt.Errorf("a structured authorization file replaces --authorization-mode, so it could drop Node or RBAC, which k1m always authorizes with (%s): add an authorizer to the mode list instead, e.g. --kube-apiserver-arg=authorization-mode=Node,RBAC,Webhook with --kube-apiserver-arg=authorization-webhook-config-file=FILE", authorizers)
	case "anonymous-auth":
		// k1m passes no --anonymous-auth: kube-apiserver's default, true.
		return errors.New("k1m keeps kube-apiserver's default, true: the join reads the cluster CA (kube-public/cluster-info, whose hash the token pins) anonymously, as kubeadm's does, and RBAC grants anonymous requests only that and /healthz, /livez, /readyz and /version; leave --anonymous-auth out")
	}
	return nil
}

// checkAuthorizationMode wants Node and RBAC in the list and no
// AlwaysAllow; other authorizers (Webhook, ABAC) may be added. The error
// shows the list made valid.
func checkAuthorizationMode(value string) error {
	modes := splitList(value)
	valid := []string{nodeAuthorizer, rbacAuthorizer}
	for _, m := range modes {
		if m != "" && !slices.Contains(valid, m) && m != alwaysAllow {
			valid = append(valid, m)
		}
	}
	example := "--kube-apiserver-arg=authorization-mode=" + strings.Join(valid, ",")
	if slices.Contains(modes, alwaysAllow) {
		return fmt.Errorf("%s authorizes every request, anonymous ones included: k1m always authorizes with Node and RBAC (%s); list other authorizers beside those two, e.g. %s", alwaysAllow, authorizers, example)
	}
	var missing []string
	for _, m := range []string{nodeAuthorizer, rbacAuthorizer} {
		if !slices.Contains(modes, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("drops %s, which k1m always authorizes with (%s): list both, e.g. %s", strings.Join(missing, " and "), authorizers, example)
	}
	return nil
}

// kubeletLock is a kubelet flag whose only valid value is the one k1m's
// KubeletConfiguration sets (pkg/agent, kubeletConfig).
type kubeletLock struct {
	valid string
	// parse reads a value as the kubelet's flag parser does; kind names
	// what it wants, for a value that does not parse.
	parse func(string) (any, error)
	kind  string
	why   string
}

// kubeletLocks are the kubelet's authentication and authorization flags
// that would override k1m's KubeletConfiguration: its API serves every
// pod's logs, exec and the node's status.
var kubeletLocks = map[string]kubeletLock{
	"anonymous-auth": {valid: "false", parse: parseBool, kind: "a boolean",
		why: "k1m's kubelets refuse anonymous requests (their API reaches every pod's logs and exec)"},
	"authorization-mode": {valid: "Webhook", parse: parseString,
		why: "k1m's kubelets ask kube-apiserver to authorize each request (Webhook), never authorize every one (AlwaysAllow)"},
	"read-only-port": {valid: "0", parse: parsePort, kind: "a port number",
		why: "k1m's kubelets keep the read-only port closed (it serves pods and node status with no authentication or authorization)"},
}

// Go's flag parsers, as the kubelet's flags read their values.
func parseBool(v string) (any, error)   { return strconv.ParseBool(v) }
func parseString(v string) (any, error) { return v, nil }
func parsePort(v string) (any, error)   { return strconv.ParseInt(v, 0, 32) }

// kubeletAuthLocked refuses a kubelet flag that would let requests reach
// the kubelet's API unauthenticated or unauthorized, or a drop-in
// directory that could do the same.
func kubeletAuthLocked(name, value string) error {
	if name == "config-dir" {
		return errors.New("a drop-in directory overrides the KubeletConfiguration k1m writes, anonymous requests and authorization included: pass the kubelet's flags one by one with --kubelet-arg")
	}
	lock, ok := kubeletLocks[name]
	if !ok {
		return nil
	}
	form := fmt.Sprintf("the only valid form is --kubelet-arg=%s=%s", name, lock.valid)
	got, err := lock.parse(value)
	if err != nil {
		return fmt.Errorf("%q is not %s; %s: %s", value, lock.kind, lock.why, form)
	}
	if want, _ := lock.parse(lock.valid); got != want {
		return fmt.Errorf("%s: %s", lock.why, form)
	}
	return nil
}

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
