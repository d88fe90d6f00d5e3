// Package images writes container images as docker-archive tarballs (the
// `docker save` layout, which `ctr images import` reads) from files on disk.
// k1m never pulls an image: the pause, CoreDNS and test images are built
// from source or Debian packages and imported by the agent at start.
package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"k1m.dev/k1m/pkg/fsutil"
)

// Image is a one-layer image.
type Image struct {
	Ref        string            // repository:tag, e.g. registry.k8s.io/pause:3.10
	Files      map[string]string // path in the image -> file on disk (kept executable)
	Symlinks   map[string]string // path in the image -> link target
	Entrypoint []string
	Cmd        []string
	User       string
}

// epoch keeps archives byte-for-byte reproducible.
var epoch = time.Unix(0, 0).UTC()

// Write writes img as a docker archive at path (atomically).
func Write(img Image, path string) error {
	layer, err := img.layer()
	if err != nil {
		return err
	}
	diffID := digest(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Cmd":        img.Cmd,
			"User":       img.User,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + diffID}},
	})
	if err != nil {
		return err
	}
	configName := digest(config) + ".json"
	layerName := diffID + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{img.Ref}, "Layers": []string{layerName},
	}})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := addFile(tw, e.name, e.data, 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return fsutil.WriteFile(path, out.Bytes(), 0o644)
}

// layer is the image's filesystem as an uncompressed tar.
func (img Image) layer() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDirs := func(p string) error {
		var parents []string
		for d := filepath.Dir(p); d != "." && d != "/" && !dirs[d]; d = filepath.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: parents[i] + "/", Mode: 0o755, ModTime: epoch}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range sortedKeys(img.Files) {
		data, err := os.ReadFile(img.Files[name])
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Ref, err)
		}
		rel := clean(name)
		if err := addDirs(rel); err != nil {
			return nil, err
		}
		if err := addFile(tw, rel, data, 0o755); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(img.Symlinks) {
		rel := clean(name)
		if err := addDirs(rel); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: rel, Linkname: img.Symlinks[name], Mode: 0o777, ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: mode, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := io.Copy(tw, bytes.NewReader(data))
	return err
}

func clean(p string) string {
	return filepath.Clean("/" + p)[1:]
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
