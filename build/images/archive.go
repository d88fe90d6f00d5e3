// Package images writes container images as docker-archive tarballs (the
// `docker save` layout, which `ctr images import`, `docker load` and
// `kind load image-archive` read) from files on disk, without a daemon.
// k1m never pulls an image: the pause, CoreDNS and test images are built
// from source or Debian packages and imported into the nodes.
package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"k1m.dev/k1m/pkg/fsutil"
)

// Config is the part of an image's config a container runtime reads.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string // PATH is added when missing
	User       string
	WorkingDir string
	StopSignal string            // e.g. SIGRTMIN+3 for systemd; empty: the runtime's default
	Labels     map[string]string // image labels (docker image inspect shows them)
}

// Spec is one image of an archive: its names, config and layers (bottom
// first). Images of one archive may share layers; each is stored once.
type Spec struct {
	Tags   []string
	Config Config
	Layers []Layer
}

// Image is a one-layer image made of files from disk, the simple case.
type Image struct {
	Ref        string            // repository:tag, e.g. registry.k8s.io/pause:3.10
	Files      map[string]string // path in the image -> file on disk (its mode is kept)
	Symlinks   map[string]string // path in the image -> link target
	Entrypoint []string
	Cmd        []string
	User       string
}

// epoch keeps archives byte-for-byte reproducible.
var epoch = time.Unix(0, 0).UTC()

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Write writes img as a docker archive at path (atomically).
func Write(img Image, path string) error {
	layer, err := FilesLayer(img.Files, img.Symlinks, path+".layer")
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	defer os.Remove(layer.Path)
	return WriteArchive(path, Spec{
		Tags:   []string{img.Ref},
		Config: Config{Entrypoint: img.Entrypoint, Cmd: img.Cmd, User: img.User},
		Layers: []Layer{layer},
	})
}

// WriteArchive writes specs as one docker archive at path (atomically),
// streaming the layer files into it.
func WriteArchive(path string, specs ...Spec) error {
	err := fsutil.WriteFileFrom(path, 0o644, func(w io.Writer) error { return writeArchive(w, specs) })
	if err != nil {
		return fmt.Errorf("writing image archive %s: %w", path, err)
	}
	return nil
}

type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func writeArchive(w io.Writer, specs []Spec) error {
	tw := tar.NewWriter(w)
	written := map[string]bool{}
	var manifest []manifestEntry
	for _, s := range specs {
		if len(s.Tags) == 0 || len(s.Layers) == 0 {
			return fmt.Errorf("an image needs at least one tag and one layer (tags %v, %d layers)", s.Tags, len(s.Layers))
		}
		entry := manifestEntry{RepoTags: s.Tags}
		for _, l := range s.Layers {
			name := l.DiffID + "/layer.tar"
			entry.Layers = append(entry.Layers, name)
			if written[name] {
				continue
			}
			if err := addLayerFile(tw, name, l); err != nil {
				return err
			}
			written[name] = true
		}
		config, err := s.configJSON()
		if err != nil {
			return err
		}
		entry.Config = digest(config) + ".json"
		if !written[entry.Config] {
			if err := addFile(tw, entry.Config, config, 0o644); err != nil {
				return err
			}
			written[entry.Config] = true
		}
		manifest = append(manifest, entry)
	}
	data, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := addFile(tw, "manifest.json", data, 0o644); err != nil {
		return err
	}
	return tw.Close()
}

func (s Spec) configJSON() ([]byte, error) {
	env := s.Config.Env
	if !hasPath(env) {
		env = append([]string{defaultPath}, env...)
	}
	var diffIDs []string
	for _, l := range s.Layers {
		diffIDs = append(diffIDs, "sha256:"+l.DiffID)
	}
	config := map[string]any{
		"Entrypoint": s.Config.Entrypoint,
		"Cmd":        s.Config.Cmd,
		"User":       s.Config.User,
		"WorkingDir": s.Config.WorkingDir,
		"Env":        env,
	}
	if s.Config.StopSignal != "" {
		config["StopSignal"] = s.Config.StopSignal
	}
	if len(s.Config.Labels) > 0 {
		config["Labels"] = s.Config.Labels
	}
	return json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       config,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
}

func hasPath(env []string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return true
		}
	}
	return false
}

// addLayerFile stores a layer tar inside the archive.
func addLayerFile(tw *tar.Writer, name string, l Layer) error {
	return addDiskFile(tw, name, l.Path, func(fs.FileMode) int64 { return 0o644 })
}

func addFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: mode, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func clean(p string) string {
	return filepath.Clean("/" + p)[1:]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
