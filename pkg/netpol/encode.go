package netpol

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// The published form of a node's rules: each distinct peer list once, as
// a set its rules name by number. Many pods of one node usually share
// their policies, and with them peer lists as long as a namespace's pods.
type published struct {
	Sets [][]netip.Prefix `json:"sets,omitempty"`
	Pods []publishedPod   `json:"pods"`
}

type publishedPod struct {
	Namespace       string          `json:"namespace"`
	Name            string          `json:"name"`
	IPs             []netip.Addr    `json:"ips"`
	IngressIsolated bool            `json:"ingressIsolated,omitempty"`
	EgressIsolated  bool            `json:"egressIsolated,omitempty"`
	Ingress         []publishedRule `json:"ingress,omitempty"`
	Egress          []publishedRule `json:"egress,omitempty"`
}

// publishedRule names its peers' set, from 1; 0 is every address. Ports
// nil is every port.
type publishedRule struct {
	Set   int    `json:"set,omitempty"`
	Ports []Port `json:"ports,omitempty"`
}

// Encode writes a node's rules in their published form.
func Encode(rules []PodRules) ([]byte, error) {
	var out published
	index := map[string]int{}
	intern := func(r Rule) publishedRule {
		if r.Peers == nil {
			return publishedRule{Ports: r.Ports}
		}
		key := setKey(r.Peers)
		n, ok := index[key]
		if !ok {
			out.Sets = append(out.Sets, r.Peers)
			n = len(out.Sets)
			index[key] = n
		}
		return publishedRule{Set: n, Ports: r.Ports}
	}
	out.Pods = []publishedPod{}
	for _, p := range rules {
		pp := publishedPod{Namespace: p.Namespace, Name: p.Name, IPs: p.IPs, IngressIsolated: p.IngressIsolated, EgressIsolated: p.EgressIsolated}
		for _, r := range p.Ingress {
			pp.Ingress = append(pp.Ingress, intern(r))
		}
		for _, r := range p.Egress {
			pp.Egress = append(pp.Egress, intern(r))
		}
		out.Pods = append(out.Pods, pp)
	}
	return json.Marshal(out)
}

// Decode reads a node's published rules; the rules naming one set share
// its slice.
func Decode(data []byte) ([]PodRules, error) {
	var in published
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, err
	}
	rule := func(r publishedRule) (Rule, error) {
		if r.Set == 0 {
			return Rule{Ports: r.Ports}, nil
		}
		if r.Set < 0 || r.Set > len(in.Sets) {
			return Rule{}, fmt.Errorf("a rule names set %d of %d", r.Set, len(in.Sets))
		}
		peers := in.Sets[r.Set-1]
		if peers == nil {
			peers = []netip.Prefix{}
		}
		return Rule{Peers: peers, Ports: r.Ports}, nil
	}
	var out []PodRules
	for _, p := range in.Pods {
		pr := PodRules{Namespace: p.Namespace, Name: p.Name, IPs: p.IPs, IngressIsolated: p.IngressIsolated, EgressIsolated: p.EgressIsolated}
		for _, r := range p.Ingress {
			compiled, err := rule(r)
			if err != nil {
				return nil, err
			}
			pr.Ingress = append(pr.Ingress, compiled)
		}
		for _, r := range p.Egress {
			compiled, err := rule(r)
			if err != nil {
				return nil, err
			}
			pr.Egress = append(pr.Egress, compiled)
		}
		out = append(out, pr)
	}
	return out, nil
}

func setKey(peers []netip.Prefix) string {
	var b strings.Builder
	for _, p := range peers {
		b.WriteString(p.String())
		b.WriteByte(',')
	}
	return b.String()
}
