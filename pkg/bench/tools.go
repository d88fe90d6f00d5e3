package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// KwokModule is the kwok release the kwok scenario builds (build/versions.env pins it too).
const KwokModule = "sigs.k8s.io/kwok"

// EnsureKwok builds kwok from its module (outside k1m's module graph, as
// its own main module) into buildOut/tools/bin once, and returns the binary
// and the module's source directory (for its stage files).
func EnsureKwok(ctx context.Context, buildOut string, progress io.Writer) (bin, moduleDir string, err error) {
	version := os.Getenv("KWOK_VERSION")
	if version == "" {
		return "", "", fmt.Errorf("KWOK_VERSION is not set: run through make bench (it reads build/versions.env)")
	}
	mod := KwokModule + "@" + version
	download := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	download.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	download.Dir = os.TempDir()
	out, err := download.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s: no module directory in %q", mod, out)
	}
	binDir, err := filepath.Abs(filepath.Join(buildOut, "tools", version))
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(binDir, "kwok")
	if _, err := os.Stat(bin); err == nil {
		return bin, info.Dir, nil
	}
	fmt.Fprintf(progress, "building kwok %s into %s (once; a few minutes cold)\n", version, binDir)
	install := exec.CommandContext(ctx, "go", "install", "-trimpath", "-ldflags=-s -w", KwokModule+"/cmd/kwok@"+version)
	install.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "GOBIN="+binDir)
	install.Dir = os.TempDir()
	install.Stdout, install.Stderr = progress, progress
	if err := install.Run(); err != nil {
		return "", "", fmt.Errorf("building kwok %s: %w", version, err)
	}
	return bin, info.Dir, nil
}
