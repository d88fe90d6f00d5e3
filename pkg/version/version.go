// Package version reports the build's identity. The build stamps
// k8s.io/component-base/version through -ldflags (see build/cmd/k1m-build), so k1m
// and every component it runs report the same string.
package version

import (
	"fmt"

	"k8s.io/component-base/version"
)

// String is the one-line version: the k1m version (which names the
// Kubernetes release and the k1m commit), the commit and the Go version.
func String() string {
	info := version.Get()
	return fmt.Sprintf("k1m %s (commit %s, tree %s, built %s, %s %s)",
		info.GitVersion, info.GitCommit, info.GitTreeState, info.BuildDate, info.GoVersion, info.Platform)
}
