// Package kwokstages writes the kwok node stages the kwok scenario runs
// with. It has no dependencies so that k1m-build, which builds kwok for
// the benchmark (k1m-build bench-tools), can write them at build time.
package kwokstages

import (
	"fmt"
	"os"
	"path/filepath"
)

// Module is kwok's module; build/versions.env pins its version
// (KWOK_VERSION).
const Module = "sigs.k8s.io/kwok"

// files are kwok's own stage files, in its module: initialize, then
// heartbeat with a Lease.
var files = []string{"kustomize/stage/node/fast/node-initialize.yaml", "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"}

// Write writes kwok's node stages (initialize, then heartbeat with Lease)
// from the kwok module's own stage files into one file at path, so the
// simulated nodes post their status every 10-20 min like kubelets with
// Leases do. kwok v0.7.0's CLI picks the stages without Lease when a lease
// duration is set (its default-stage choice is inverted), hence the
// explicit file.
func Write(kwokModuleDir, path string) error {
	var out []byte
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(kwokModuleDir, rel))
		if err != nil {
			return fmt.Errorf("reading kwok's stage %s: %w", rel, err)
		}
		out = append(append(out, "---\n"...), data...)
		out = append(out, '\n')
	}
	return os.WriteFile(path, out, 0o644)
}
