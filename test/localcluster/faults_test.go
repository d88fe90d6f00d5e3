package localcluster

import (
	"net/netip"
	"testing"
)

// A node in the host's network namespace (a lone server) cannot be cut
// off: rules there would cut the whole machine.
func TestCutRefusesTheHostNamespace(t *testing.T) {
	lone := Node{Role: Server, Index: 1}
	want := "k1m server runs in the host's network namespace: only a node in a namespace of its own can be cut off"
	for name, op := range map[string]func(Node, ...netip.Addr) error{"Cut": Cut, "Heal": Heal} {
		if err := op(lone, netip.MustParseAddr("fddf:4035:b520::1:2")); err == nil || err.Error() != want {
			t.Errorf("%s of a lone server: %v, want %q", name, err, want)
		}
	}
}
