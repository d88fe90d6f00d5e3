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
