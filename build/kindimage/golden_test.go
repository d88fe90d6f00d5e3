package kindimage

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/generated.golden from the package's output")

// rendered is every file this package writes into the kind images, byte
// for byte, with the base image's packages and key: what a change to the
// package must leave alone unless it means to change the images.
func rendered() []byte {
	var b bytes.Buffer
	file := func(where, path string, mode os.FileMode, data string) {
		fmt.Fprintf(&b, "=== %s %s %#o (%d bytes)\n%s", where, path, mode, len(data), data)
	}
	n := Node{Version: "v1.32.5+k1m.0123abcd4567"}
	for _, g := range generatedFiles(n) {
		file("node", g.path, g.mode, g.data)
	}
	file("base", "/etc/containerd/config.toml", 0o644, ContainerdConfig)
	file("kube-proxy", "/usr/sbin/iptables-wrapper", 0o755, iptablesWrapper)
	in := Inputs{KindDir: "/mod/sigs.k8s.io/kind@v0.27.0"}
	fmt.Fprintf(&b, "=== base packages\n%s\n", strings.Join(BasePackages, " "))
	fmt.Fprintf(&b, "=== base key (kind v0.27.0)\n%s\n", in.BaseKey())
	fmt.Fprintf(&b, "=== kube-proxy packages\n%s\n", strings.Join(proxyPackages, " "))
	fmt.Fprintf(&b, "=== k1m-cni packages\n%s\n", strings.Join(cniPackages, " "))
	fmt.Fprintf(&b, "=== etcd-servers-overrides\n%s\n", EtcdOverrides())
	return b.Bytes()
}

// TestRenderedFilesAreGolden compares the images' generated files with
// testdata/generated.golden; go test -run Golden -update rewrites it after
// a change meant to change the images.
func TestRenderedFilesAreGolden(t *testing.T) {
	path := filepath.Join("testdata", "generated.golden")
	got := rendered()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.SplitAfter(string(got), "\n"), strings.SplitAfter(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("the generated files differ from %s from line %d:\n got %q\nwant %q\n(go test -run Golden -update rewrites it, if the images are meant to change)", path, i+1, g, w)
			}
		}
	}
}
