package version

import (
	"fmt"
	"maps"
	"slices"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/version"
)

// The releases k1m lets run together follow Kubernetes' version skew
// policy, which its patched components inherit: the kube-apiservers of a
// cluster within one minor release of each other, and a kubelet never
// newer than kube-apiserver and at most three minor releases older.
const (
	maxServerSkew = 1
	maxAgentLag   = 3
)

// Mine is the release this binary was built as (the build stamps it:
// v1.32.5+k1m.COMMIT).
func Mine() string { return version.Get().GitVersion }

// CheckAgent refuses an agent of release agent next to servers (their
// kube-apiserver address to their release) it cannot work with, naming
// both releases and the server. A release that does not parse (a build
// without the stamp, or a server of a release before servers recorded
// theirs) is not checked.
func CheckAgent(agent string, servers map[string]string) error {
	mine, err := utilversion.ParseSemantic(agent)
	if err != nil {
		return nil
	}
	for _, addr := range sortedKeys(servers) {
		theirs, err := utilversion.ParseSemantic(servers[addr])
		if err != nil {
			continue
		}
		switch lag := minorDistance(theirs, mine); {
		case lag < 0 || mine.Major() != theirs.Major():
			return fmt.Errorf("this agent runs %s and server %s runs %s: an agent may not be newer than a server (a kubelet may not be newer than kube-apiserver); upgrade every server first", agent, addr, servers[addr])
		case lag > maxAgentLag:
			return fmt.Errorf("this agent runs %s and server %s runs %s: an agent may be at most %d minor releases older than a server; upgrade this agent", agent, addr, servers[addr], maxAgentLag)
		}
	}
	return nil
}

// CheckServer refuses a server of release server next to the others
// (their kube-apiserver address to their release) when they would differ
// by more than one minor release, naming both releases and the server.
// Its own address is skipped; releases that do not parse are not checked.
func CheckServer(server, own string, servers map[string]string) error {
	mine, err := utilversion.ParseSemantic(server)
	if err != nil {
		return nil
	}
	for _, addr := range sortedKeys(servers) {
		theirs, err := utilversion.ParseSemantic(servers[addr])
		if err != nil || addr == own {
			continue
		}
		if d := minorDistance(theirs, mine); mine.Major() != theirs.Major() || d > maxServerSkew || d < -maxServerSkew {
			return fmt.Errorf("this server runs %s and server %s runs %s: servers may differ by at most %d minor release; upgrade one release at a time, every server before the next", server, addr, servers[addr], maxServerSkew)
		}
	}
	return nil
}

// minorDistance is how many minor releases b is behind a (negative: ahead).
func minorDistance(a, b *utilversion.Version) int {
	return int(a.Minor()) - int(b.Minor())
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
