package loadbalancer

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
)

// Order is nodeName's preference order over servers: its preferred server
// first, then the ones it fails over to. It is rendezvous (highest random
// weight) hashing: each server gets a score from a hash of the node name
// and the server's address, and the servers are ranked by score. Compared
// with a hash of the node name modulo the sorted list:
//
//   - it is as stable and as even (every server comes first for about the
//     same share of the nodes), and does not depend on the list's order;
//   - when a server leaves, only its own nodes move, and they spread over
//     all the others instead of piling onto its neighbour in the list;
//   - when a server joins, it takes its share from every other server,
//     and no other node moves.
//
// So nodes never all move at once, and a server coming back gets back the
// nodes it had.
func Order(nodeName string, servers []string) []string {
	type scored struct {
		address string
		score   uint64
	}
	ranked := make([]scored, len(servers))
	for i, s := range servers {
		sum := sha256.Sum256([]byte(nodeName + "\x00" + s))
		ranked[i] = scored{s, binary.BigEndian.Uint64(sum[:8])}
	}
	slices.SortFunc(ranked, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return strings.Compare(a.address, b.address)
	})
	order := make([]string, len(ranked))
	for i, r := range ranked {
		order[i] = r.address
	}
	return order
}
