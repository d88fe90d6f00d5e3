package stamp

import (
	"strings"
	"testing"
	"time"
)

var commit = Commit{Hash: "0123456789abcdef0123456789abcdef01234567", Date: time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC)}

func TestComputeK1m(t *testing.T) {
	info, err := Compute(K1m, "v1.32.5", commit)
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != "v1.32.5+k1m.0123456789ab" || info.GitCommit != commit.Hash || info.GitTreeState != "clean" {
		t.Errorf("got %+v", info)
	}
	if info.Major != "1" || info.Minor != "32" || info.BuildDate != "2026-11-22T01:02:03Z" {
		t.Errorf("got %+v", info)
	}
	dirty := commit
	dirty.Dirty = true
	info, _ = Compute(K1m, "v1.32.5", dirty)
	if info.GitVersion != "v1.32.5+k1m.0123456789ab.dirty" || info.GitTreeState != "dirty" {
		t.Errorf("dirty: got %+v", info)
	}
}

func TestComputeStockAndErrors(t *testing.T) {
	info, err := Compute(Stock, "v1.32.5", commit)
	if err != nil || info.GitVersion != "v1.32.5" || info.GitCommit != "" {
		t.Errorf("stock: %+v %v", info, err)
	}
	if _, err := Compute(K1m, "1.32.5", commit); err == nil || !strings.Contains(err.Error(), "KUBERNETES_VERSION") {
		t.Errorf("bad version: %v", err)
	}
	if _, err := Compute("mine", "v1.32.5", commit); err == nil {
		t.Error("unknown flavor accepted")
	}
}

func TestLDFlagsStampBothVersionPackages(t *testing.T) {
	info, _ := Compute(K1m, "v1.32.5", commit)
	flags := info.LDFlags()
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.32.5+k1m.0123456789ab",
		"-X k8s.io/client-go/pkg/version.gitVersion=v1.32.5+k1m.0123456789ab",
		"-X k8s.io/component-base/version.gitCommit=" + commit.Hash,
		"-X k8s.io/client-go/pkg/version.gitMinor=32",
	} {
		if !strings.Contains(flags, want) {
			t.Errorf("ldflags lack %q", want)
		}
	}
}
