package airgap

import (
	"archive/tar"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestArchivesNamesTheFixWhenEmpty(t *testing.T) {
	dir := t.TempDir()
	if _, err := Archives(dir); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Fatalf("want an error telling to run make images, got %v", err)
	}
	for _, n := range []string{"b.tar", "a.tar", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Archives(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || filepath.Base(got[0]) != "a.tar" || filepath.Base(got[1]) != "b.tar" {
		t.Fatalf("Archives = %v, want a.tar, b.tar", got)
	}
}

// dockerArchive writes a docker-format archive whose manifest.json is
// manifest.
func dockerArchive(t *testing.T, path, manifest string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for name, body := range map[string]string{"abc/layer.tar": "", "manifest.json": manifest} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRefs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	dockerArchive(t, good, `[{"Config":"c.json","RepoTags":["registry.k8s.io/pause:3.10","k1m.local/pause:x","busybox:1.36"],"Layers":["abc/layer.tar"]}]`)
	got, err := Refs(good)
	if err != nil {
		t.Fatal(err)
	}
	// As containerd lists them: a short name is docker.io/library's.
	if want := []string{"docker.io/library/busybox:1.36", "k1m.local/pause:x", "registry.k8s.io/pause:3.10"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Refs = %q, want %q", got, want)
	}
	untagged := filepath.Join(dir, "untagged.tar")
	dockerArchive(t, untagged, `[{"Config":"c.json","Layers":["abc/layer.tar"]}]`)
	if _, err := Refs(untagged); err == nil || err.Error() != "image archive "+untagged+" names no image (manifest.json has no RepoTags)" {
		t.Errorf("untagged archive: %v", err)
	}
}

func TestMissing(t *testing.T) {
	refs := map[string][]string{"a.tar": {"a:1"}, "b.tar": {"b:1", "b:2"}, "c.tar": {"c:1"}}
	have := map[string]bool{"a:1": true, "b:1": true, "b:2": false, "c:1": false}
	if got, want := missing(refs, have), []string{"b.tar", "c.tar"}; !reflect.DeepEqual(got, want) {
		t.Errorf("missing = %q, want %q", got, want)
	}
}
