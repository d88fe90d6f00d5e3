package codegen

import (
	"strings"
	"testing"
)

func TestParseField(t *testing.T) {
	runs, err := ParseField("deepcopy-gen k8s.io/a k8s.io/b\nconversion-gen k8s.io/c")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Generator != "deepcopy-gen" || strings.Join(runs[0].Packages, ",") != "k8s.io/a,k8s.io/b" || runs[1].Packages[0] != "k8s.io/c" {
		t.Errorf("got %+v", runs)
	}
	if runs, err := ParseField(""); err != nil || len(runs) != 0 {
		t.Errorf("empty field: %v %v", runs, err)
	}
	if _, err := ParseField("openapi-gen k8s.io/a"); err == nil || !strings.Contains(err.Error(), "unknown generator") {
		t.Errorf("unknown generator: %v", err)
	}
	if _, err := ParseField("deepcopy-gen"); err == nil || !strings.Contains(err.Error(), "names no package") {
		t.Errorf("no package: %v", err)
	}
}
