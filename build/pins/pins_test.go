package pins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func load(t *testing.T, content string) (Pins, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "versions.env")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

func TestLoadAndModuleVersion(t *testing.T) {
	p, err := load(t, "# pins\nKUBERNETES_VERSION=v1.32.5\n\nKUBERNETES_STAGING_VERSION=v0.32.5\nETCD_VERSION=v3.5.16\n")
	if err != nil {
		t.Fatal(err)
	}
	for mod, want := range map[string]string{
		"k8s.io/kubernetes": "v1.32.5", "k8s.io/apiserver": "v0.32.5", "go.etcd.io/etcd/server/v3": "v3.5.16",
		"go.etcd.io/etcd/client/v2": "v2.305.16",
	} {
		if got, ok := p.ModuleVersion(mod); !ok || got != want {
			t.Errorf("ModuleVersion(%s) = %q, %v; want %q", mod, got, ok, want)
		}
	}
	if _, ok := p.ModuleVersion("k8s.io/utils"); ok {
		t.Error("k8s.io/utils is not pinned by versions.env, yet ModuleVersion says it is")
	}
	if _, err := p.Get("KIND_VERSION"); err == nil || !strings.Contains(err.Error(), "KIND_VERSION=") {
		t.Errorf("Get of a missing pin: %v", err)
	}
}

func TestLoadRejectsMalformedLines(t *testing.T) {
	for _, content := range []string{"kubernetes=v1\n", "A = b\n", "A=b\nA=c\n"} {
		if _, err := load(t, content); err == nil {
			t.Errorf("%q accepted", content)
		}
	}
}
