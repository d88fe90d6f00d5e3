// Package conformance runs the upstream e2e conformance suite against a
// cluster the way Sonobuoy's e2e plugin does: the conformance image runs as
// a pod (go-runner driving ginkgo and e2e.test, results in a shared
// directory, progress posted to a sidecar), and the results come back as a
// tarball in Sonobuoy's layout.
package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Image is the k1m build of registry.k8s.io/conformance (k1m-build
// conformance); its tag follows KUBERNETES_VERSION (checked by the build).
const Image = "k1m.local/conformance:v1.32.5"

// Mode is a named set of specs, as Sonobuoy's --mode.
type Mode struct {
	Name     string
	Focus    string
	Skip     string
	Parallel bool
	// Procs is the number of ginkgo processes of a parallel run (0:
	// ginkgo's default, one per CPU the e2e pod sees).
	Procs int
	// LabelFilter is ginkgo's --label-filter (empty: none); the serial
	// phase of a parallel run selects its specs by label.
	LabelFilter string
	// Specs is how many specs the mode runs when its focus names them one
	// by one (0: not known): a run of fewer means a name no longer matches.
	Specs int
}

// sonobuoyDefaultSkip is what Sonobuoy skips unless told otherwise.
const sonobuoyDefaultSkip = `\[Disruptive\]|NoExecuteTaintManager`

// CuratedFocus are the conformance specs that exercise what the k1m
// patches touch: Leases and node lifecycle (renew interval, no-fsync
// etcd), Events (no-fsync etcd), watch and list (the hashmap watch
// cache), Services over IPv6 and DNS (IPv6-only defaults), and a
// DaemonSet's pod on every node. The DaemonSet spec is [Serial], so a
// parallel curated run (make test's) goes through both phases.
var CuratedFocus = []string{
	`Lease lease API should be available`,
	`Node Lifecycle should run through the lifecycle of a node`,
	`Events should manage the lifecycle of an event`,
	`Events API should ensure that an event can be fetched, patched, deleted, and listed`,
	`Watchers should be able to restart watching from the last resource version observed by the previous watch`,
	`Watchers should observe add, update, and delete watch notifications on configmaps`,
	`Servers with support for API chunking should return chunks of results for list calls`,
	`Services should serve a basic endpoint from pods`,
	`Services should be able to change the type from ClusterIP to ExternalName`,
	`DNS should provide DNS for the cluster`,
	`DNS should provide DNS for services`,
	`Daemon set [Serial] should run and stop simple daemon`,
}

// Modes are Sonobuoy's modes (pkg/client/modes in Sonobuoy), plus k1m's
// curated set.
var Modes = map[string]Mode{
	"quick":                      {Name: "quick", Focus: "Pods should be submitted and removed", Skip: sonobuoyDefaultSkip, Specs: 1},
	"non-disruptive-conformance": {Name: "non-disruptive-conformance", Focus: `\[Conformance\]`, Skip: sonobuoyDefaultSkip},
	"certified-conformance":      {Name: "certified-conformance", Focus: `\[Conformance\]`},
	"k1m-curated":                {Name: "k1m-curated", Focus: curatedRegexp(), Skip: sonobuoyDefaultSkip, Specs: len(CuratedFocus) + len(NetpolFocus)},
	// The upstream NetworkPolicy specs (docs/components.md), but those
	// sending SCTP: k1m's nodes run no SCTP module.
	"netpol":         {Name: "netpol", Focus: `\[sig-network\] Netpol`, Skip: sonobuoyDefaultSkip + `|\[Feature:SCTPConnectivity\]`},
	"netpol-curated": {Name: "netpol-curated", Focus: quoteAll(NetpolFocus), Skip: sonobuoyDefaultSkip, Specs: len(NetpolFocus)},
}

// NetpolFocus are upstream NetworkPolicy specs covering ingress, egress,
// namespace and pod selectors and ipBlock excepts, over TCP.
var NetpolFocus = []string{
	`Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy`,
	`Netpol NetworkPolicy between server and client should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector`,
	`Netpol NetworkPolicy between server and client should deny egress from pods based on PodSelector`,
	`Netpol NetworkPolicy between server and client should enforce except clause while egress access to server in CIDR block`,
}

func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, f := range names {
		quoted[i] = regexpQuote(f)
	}
	return strings.Join(quoted, "|")
}

// curatedRegexp is k1m-curated's focus: CuratedFocus and NetpolFocus, so
// that make test's one curated run also enforces NetworkPolicy.
func curatedRegexp() string { return quoteAll(append(slices.Clone(CuratedFocus), NetpolFocus...)) }

// regexpQuote escapes what ginkgo's regexp would read specially; spec
// names use only parentheses, brackets and dots of those.
func regexpQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `.`, `\.`, `(`, `\(`, `)`, `\)`, `[`, `\[`, `]`, `\]`, `*`, `\*`, `+`, `\+`, `?`, `\?`, `|`, `\|`)
	return r.Replace(s)
}

// ModeNamed returns the mode called name, or an error naming the valid ones.
func ModeNamed(name string) (Mode, error) {
	if m, ok := Modes[name]; ok {
		return m, nil
	}
	return Mode{}, fmt.Errorf("--mode %q: want one of %s", name, strings.Join(ModeNames(), ", "))
}

// ModeNames lists the modes, sorted.
func ModeNames() []string {
	var names []string
	for n := range Modes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// serialSpecs matches the spec texts of [Serial] specs, which must not
// share the cluster with other specs. framework.WithSerial adds both the
// text and the ginkgo label "Serial"; every [Serial] spec of 1.32 is made
// that way (no spec writes the tag by hand).
const (
	serialSpecs = `\[Serial\]`
	serialLabel = "Serial"
)

// Phase is one ginkgo run (one conformance pod) of a run.
type Phase struct {
	Name string
	Mode Mode
}

// Phases splits a run into its ginkgo runs. A serial run is one. A parallel
// run is two: upstream's go-runner skips [Serial] specs in a parallel run
// and runs nothing after, so k1m runs the mode's other specs in parallel
// first, then its [Serial] specs one at a time (same focus and skip, plus
// ginkgo's label filter: a regexp cannot say "matches the focus and holds
// [Serial]" when the focus itself names a [Serial] spec), and merges the
// reports. A skip that already leaves out [Serial] specs needs no second
// phase.
func (m Mode) Phases() []Phase {
	if !m.Parallel {
		return []Phase{{Name: "serial", Mode: m}}
	}
	if skipsSerial(m.Skip) {
		return []Phase{{Name: "parallel", Mode: m}}
	}
	par := m
	par.Skip = serialSpecs
	if m.Skip != "" {
		par.Skip = m.Skip + "|" + serialSpecs
	}
	ser := m
	ser.Parallel, ser.Procs, ser.LabelFilter = false, 0, serialLabel
	return []Phase{{Name: "parallel", Mode: par}, {Name: "serial", Mode: ser}}
}

// skipsSerial tells whether a skip expression leaves out every [Serial]
// spec (it matches the tag itself).
func skipsSerial(skip string) bool {
	if skip == "" {
		return false
	}
	re, err := regexp.Compile(skip)
	return err == nil && re.MatchString("[Serial]")
}
