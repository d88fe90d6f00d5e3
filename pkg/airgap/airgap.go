// Package airgap names the images every k1m cluster runs and imports them
// into containerd from the images directory the build fills (like k3s's
// air-gap images): nothing is ever pulled from a registry.
package airgap

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The images of a cluster. The names are upstream's, so that kubelet
// defaults and manifests written for upstream find them.
const (
	PauseImage   = "registry.k8s.io/pause:3.10"
	CoreDNSImage = "registry.k8s.io/coredns/coredns:" + CoreDNSVersion
	// BusyboxImage serves the local-path provisioner's helper pods and
	// the integration tests (httpd, nc, nslookup), built from Debian's
	// busybox-static.
	BusyboxImage = "k1m.local/busybox:1.35"
	// CoreDNSVersion must equal COREDNS_VERSION in build/versions.env
	// (checked by a test).
	CoreDNSVersion = "v1.11.3"
	// LocalPathProvisionerImage serves the default StorageClass
	// (manifests/local-storage.yaml); its helper pods run BusyboxImage.
	LocalPathProvisionerImage = "docker.io/rancher/local-path-provisioner:" + LocalPathProvisionerVersion
	// LocalPathProvisionerVersion must equal LOCAL_PATH_PROVISIONER_VERSION
	// in build/versions.env (checked by a test).
	LocalPathProvisionerVersion = "v0.0.30"
	// MetricsServerImage serves the Metrics API (manifests/metrics-server.yaml).
	MetricsServerImage = "registry.k8s.io/metrics-server/metrics-server:" + MetricsServerVersion
	// MetricsServerVersion must equal METRICS_SERVER_VERSION in
	// build/versions.env (checked by a test).
	MetricsServerVersion = "v0.8.0"
)

// Archives lists the image archives (*.tar) in dir, sorted.
func Archives(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no image archives (*.tar) in %s: build them with `make images`, or point --images-dir at them", dir)
	}
	sort.Strings(paths)
	return paths, nil
}

// Import loads every archive of dir into containerd's k8s.io namespace
// through ctr, the client Debian's containerd package ships.
func Import(ctx context.Context, address, dir string) error {
	paths, err := Archives(dir)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := importArchive(ctx, address, p); err != nil {
			return err
		}
	}
	return nil
}

func importArchive(ctx context.Context, address, path string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", address, "--namespace", "k8s.io", "images", "import", "--no-unpack=false", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("importing image archive %s into containerd: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Listed reports which of refs containerd has.
func Listed(ctx context.Context, address string, refs ...string) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", address, "--namespace", "k8s.io", "images", "list", "--quiet").Output()
	if err != nil {
		return nil, fmt.Errorf("listing containerd images: %v", err)
	}
	have := map[string]bool{}
	for _, line := range strings.Fields(string(out)) {
		have[line] = true
	}
	got := map[string]bool{}
	for _, r := range refs {
		got[r] = have[r]
	}
	return got, nil
}
