package pins

import (
	"path/filepath"
	"testing"

	"k1m.dev/k1m/pkg/airgap"
)

// The product names the CoreDNS version it runs (pkg/airgap); the build
// makes the image from the pin. The check lives here because tooling may
// import the product, never the other way round.
func TestCoreDNSVersionMatchesThePin(t *testing.T) {
	p, err := Load(filepath.Join("..", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Get("COREDNS_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if airgap.CoreDNSVersion != want {
		t.Fatalf("airgap.CoreDNSVersion = %s, build/versions.env pins %s: the image the build makes would not be the one clusters run", airgap.CoreDNSVersion, want)
	}
}
