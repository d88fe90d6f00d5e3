package pins

import (
	"path/filepath"
	"testing"

	"k1m.dev/k1m/pkg/airgap"
)

// The product names the versions of the packaged components it runs
// (pkg/airgap); the build makes their images from the pins. The check
// lives here because tooling may import the product, never the other way
// round.
func TestPackagedVersionsMatchThePins(t *testing.T) {
	p, err := Load(filepath.Join("..", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	for pin, named := range map[string]string{
		"COREDNS_VERSION":                airgap.CoreDNSVersion,
		"LOCAL_PATH_PROVISIONER_VERSION": airgap.LocalPathProvisionerVersion,
		"METRICS_SERVER_VERSION":         airgap.MetricsServerVersion,
	} {
		want, err := p.Get(pin)
		if err != nil {
			t.Fatal(err)
		}
		if named != want {
			t.Errorf("pkg/airgap names %s, build/versions.env pins %s=%s: the image the build makes would not be the one clusters run", named, pin, want)
		}
	}
}
