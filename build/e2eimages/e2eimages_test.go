package e2eimages

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"k1m.dev/k1m/build/images"
)

// The keys must be e2e's RegistryList yaml names
// (test/utils/image/manifest.go), or e2e.test silently keeps upstream's.
func TestRepoListNamesE2ERegistries(t *testing.T) {
	var m map[string]string
	if err := yaml.Unmarshal([]byte(RepoList()), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"promoterE2eRegistry": Registry, "gcEtcdRegistry": EtcdRegistry}
	if len(m) != len(want) {
		t.Fatalf("repo list %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
}

func TestRefsCoverTheConformanceImages(t *testing.T) {
	refs := strings.Join(Refs(), " ")
	for _, want := range []string{
		"k1m.local/e2e-test-images/agnhost:2.53",
		"k1m.local/e2e-test-images/busybox:1.36.1-1",
		"k1m.local/e2e-test-images/httpd:2.4.38-4",
		"k1m.local/e2e-test-images/httpd:2.4.39-4",
		"k1m.local/e2e-test-images/nginx:1.14-4",
		"k1m.local/e2e-test-images/jessie-dnsutils:1.7",
		"k1m.local/e2e-test-images/sample-apiserver:1.29.2",
		"k1m.local/etcd:3.5.16-0",
	} {
		if !strings.Contains(refs, want) {
			t.Errorf("no image %s in %s", want, refs)
		}
	}
}

func TestDebianKeyFollowsThePackages(t *testing.T) {
	before := debianKey()
	DebianPackages = append(DebianPackages, "extra")
	defer func() { DebianPackages = DebianPackages[:len(DebianPackages)-1] }()
	if debianKey() == before {
		t.Error("adding a package keeps the cached Debian tree")
	}
}

func TestSpecReportsALayerThatCannotBeWritten(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs Debian's busybox-static (make deps-cluster)")
	}
	work := filepath.Join(t.TempDir(), "work")
	if err := os.WriteFile(work, nil, 0o644); err != nil { // a file where the layers folder goes
		t.Fatal(err)
	}
	in := Inputs{Busybox: "/bin/busybox", BashStatic: "/bin/bash-static", Work: work}
	for _, img := range Set {
		if img.Kind == Debian {
			continue
		}
		if _, err := in.spec(img, images.Layer{}); err == nil {
			t.Errorf("image %s: no error though its layer could not be written", img.Name)
		}
	}
}

func TestBusyboxImageLayout(t *testing.T) {
	for _, p := range []string{"/bin/busybox", "/bin/bash-static"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("needs %s (make deps-conformance)", p)
		}
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "busybox-sh"), []byte("sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := Inputs{Busybox: "/bin/busybox", BashStatic: "/bin/bash-static", Bin: bin}
	layer, err := in.busyboxLayer(filepath.Join(t.TempDir(), "busybox.tar"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(layer.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		entries[hdr.Name] = hdr
	}
	for name, want := range map[string]byte{"bin/sh": tar.TypeReg, "bin/bash": tar.TypeReg, "bin/busybox": tar.TypeReg, "etc/passwd": tar.TypeReg, "tmp/": tar.TypeDir} {
		if e := entries[name]; e == nil || e.Typeflag != want {
			t.Errorf("%s is %+v, want type %c", name, e, want)
		}
	}
	if tmp := entries["tmp/"]; tmp != nil && tmp.Mode != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777 (the probe specs write /tmp/health)", tmp.Mode)
	}
	if env := entries["bin/env"]; env == nil || env.Linkname != "busybox" {
		t.Errorf("bin/env is %+v, want busybox's applet", env)
	}
}

func TestBuildImageWritesTheImageAlone(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "etcd"), []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := Inputs{Bin: bin, Work: filepath.Join(dir, "work"), Log: io.Discard}
	archive := filepath.Join(dir, "out", "etcd.tar")
	if err := BuildImage(in, "etcd", archive); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var manifest []struct{ RepoTags []string }
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if err != nil {
			t.Fatalf("no manifest.json in %s: %v", archive, err)
		}
		if h.Name == "manifest.json" {
			data, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &manifest); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	want := []string{EtcdRegistry + "/etcd:3.5.16-0"}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, want) {
		t.Errorf("archive's images %+v, want one tagged %v", manifest, want)
	}
}

func TestBuildImageRefusesWhatItCannotWriteAlone(t *testing.T) {
	in := Inputs{Log: io.Discard}
	for name, want := range map[string]string{
		"no-such-image": `no test image "no-such-image" in the set`,
		"agnhost":       "test image agnhost is built on the Debian layer: only the whole set is written (Build)",
	} {
		err := BuildImage(in, name, filepath.Join(t.TempDir(), "x.tar"))
		if err == nil || err.Error() != want {
			t.Errorf("BuildImage(%s) = %v, want %q", name, err, want)
		}
	}
}
