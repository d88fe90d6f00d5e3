package airgap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k1m.dev/k1m/pkg/build/pins"
)

func TestCoreDNSVersionMatchesThePin(t *testing.T) {
	p, err := pins.Load(filepath.Join("..", "..", "build", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Get("COREDNS_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if CoreDNSVersion != want {
		t.Fatalf("airgap.CoreDNSVersion = %s, build/versions.env pins %s: the image the build makes would not be the one clusters run", CoreDNSVersion, want)
	}
}

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
