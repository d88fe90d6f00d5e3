package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteIsReproducibleAndNamesTheImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Image{Ref: "registry.k8s.io/pause:3.10", Files: map[string]string{"/pause": bin}, Symlinks: map[string]string{"/bin/sh": "busybox"}, Entrypoint: []string{"/pause"}}
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	for _, p := range []string{a, b} {
		if err := Write(img, p); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := os.ReadFile(a)
	second, _ := os.ReadFile(b)
	if !bytes.Equal(first, second) {
		t.Fatal("two writes of one image differ")
	}
	tr := tar.NewReader(bytes.NewReader(first))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			t.Fatal("no manifest.json in the archive")
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags, Layers []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != img.Ref || len(m[0].Layers) != 1 {
			t.Fatalf("manifest %+v", m)
		}
		return
	}
}

func TestDirLayerKeepsModesLinksAndLeavesOutDev(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "usr/bin/nnp"), "x", 0o755)
	if err := os.Chmod(filepath.Join(root, "usr/bin/nnp"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(root, "usr/bin/a"), "same", 0o644)
	if err := os.Link(filepath.Join(root, "usr/bin/a"), filepath.Join(root, "usr/bin/b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(root, "usr/bin/c")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(root, "dev/null"), "not a device", 0o644)
	layer, err := DirLayer(root, filepath.Join(t.TempDir(), "layer.tar"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	f, err := os.Open(layer.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[hdr.Name] = hdr
	}
	if h := got["usr/bin/nnp"]; h == nil || h.Mode&0o4000 == 0 {
		t.Errorf("setuid bit lost: %+v", h)
	}
	if h := got["usr/bin/b"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/a" {
		t.Errorf("hard link not kept: %+v", h)
	}
	if h := got["usr/bin/c"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "a" {
		t.Errorf("symlink not kept: %+v", h)
	}
	if got["dev/"] == nil || got["dev/null"] != nil {
		t.Errorf("want /dev kept empty, got dev/=%v dev/null=%v", got["dev/"] != nil, got["dev/null"] != nil)
	}
}

func TestWriteArchiveStoresASharedLayerOnce(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "f"), "data", 0o644)
	base, err := FilesLayer(map[string]string{"/f": filepath.Join(dir, "f")}, nil, filepath.Join(dir, "base.tar"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := FilesLayer(nil, map[string]string{"/g": "f"}, filepath.Join(dir, "top.tar"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.tar")
	err = WriteArchive(path,
		Spec{Tags: []string{"k1m.local/x:1", "k1m.local/x:2"}, Layers: []Layer{base}},
		Spec{Tags: []string{"k1m.local/y:1"}, Layers: []Layer{base, top}, Config: Config{Cmd: []string{"sh"}}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	tr := tar.NewReader(bytes.NewReader(data))
	layers := 0
	var m []struct{ RepoTags, Layers []string }
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(hdr.Name) == "layer.tar" {
			layers++
		}
		if hdr.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if layers != 2 {
		t.Errorf("archive holds %d layer files, want 2 (the shared one once)", layers)
	}
	if len(m) != 2 || len(m[0].RepoTags) != 2 || len(m[1].Layers) != 2 || m[1].Layers[0] != m[0].Layers[0] {
		t.Errorf("manifest %+v", m)
	}
	if err := WriteArchive(filepath.Join(dir, "bad.tar"), Spec{Tags: []string{"x:1"}}); err == nil {
		t.Error("an image without layers was written")
	}
}

func mustWrite(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}
