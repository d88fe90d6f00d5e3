package tool

import (
	"testing"

	"k1m.dev/k1m/pkg/flavor"
)

func TestStockTagIsTheFlavourPackages(t *testing.T) {
	if stockTag != flavor.Tag {
		t.Fatalf("k1m-build tags the stock flavour %q, pkg/flavor reads %q", stockTag, flavor.Tag)
	}
}
