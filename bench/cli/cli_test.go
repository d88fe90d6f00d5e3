package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tools are stand-ins for what k1m-build bench-tools builds.
func tools(t *testing.T) []string {
	path := filepath.Join(t.TempDir(), "benchplot")
	os.WriteFile(path, nil, 0o755)
	return []string{"--benchplot", path}
}

func TestParseRunProfileDefaultsAndOverrides(t *testing.T) {
	o, err := ParseRun(append(tools(t), "--profile", "full", "--duration", "7s", "--node-steps", "10,20", "--scenarios", "lease,nodes", "--results", "/tmp/x"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Rounds != Profiles["full"].Rounds || o.Lease.Leases != 10000 {
		t.Errorf("profile defaults not applied: rounds %d, leases %d", o.Rounds, o.Lease.Leases)
	}
	if o.Lease.Duration != 7*time.Second || o.Etcd.Duration != 7*time.Second {
		t.Errorf("--duration not applied to both floods: %v %v", o.Lease.Duration, o.Etcd.Duration)
	}
	if len(o.Nodes.Steps) != 2 || o.Nodes.Steps[1] != 20 || strings.Join(o.Scenarios, ",") != "lease,nodes" || o.Results != "/tmp/x" {
		t.Errorf("overrides not applied: %+v %v %s", o.Nodes.Steps, o.Scenarios, o.Results)
	}
}

func TestParseRunRejectsBadInputNamingTheFlag(t *testing.T) {
	cases := map[string][]string{
		"--profile":       {"--profile", "huge"},
		"--node-steps":    {"--node-steps", "5000,1000"},
		"--scenarios":     {"--scenarios", "lease,kwok"},
		"--simulator-cpu": {"--simulator-cpu", "0"},
		"--node-hold":     {"--node-hold", "-5s"},
		"--long-renew ":   {"--long-renew", "10m"},
		"--workers":       {"--leases", "10", "--workers", "20"},
		"--long-renew":    {"--long-renew", "1500ms"},
		"--leases":        {"--leases", "-5"},
	}
	for flag, args := range cases {
		_, err := ParseRun(append(tools(t), args...))
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("ParseRun(%q) = %v; want an error naming %s", args, err, flag)
		}
	}
}

func TestParseRunWantsTheBuiltTools(t *testing.T) {
	for args, want := range map[string]string{
		"":                         "--benchplot is empty: give the path k1m-build bench-tools built (make bench does)",
		"--benchplot=/nonexistent": "--benchplot /nonexistent: stat /nonexistent: no such file or directory (k1m-build bench-tools builds it)",
	} {
		_, err := ParseRun(append(strings.Fields(args), "--scenarios", "lease"))
		if err == nil || err.Error() != want {
			t.Errorf("ParseRun(%q): got %v\nwant %s", args, err, want)
		}
	}
}

func TestScaleOutOnlyWhenNamed(t *testing.T) {
	o, err := ParseRun(tools(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Scenarios, ",") != "lease,etcd,nodes,watchcache" {
		t.Errorf("default scenarios %v: make bench must not bring up the scale-out clusters", o.Scenarios)
	}
	if o.ScaleOut.K1M != "_output/bin/k1m" || o.ScaleOut.ImagesDir != "_output/images" || o.ScaleOut.DataRoot != "/var/lib/k1m-bench-scaleout" || o.ScaleOut.ServerMemory != "3Gi" {
		t.Errorf("scaleout defaults %+v", o.ScaleOut)
	}
}

func TestParseRunScaleOutNamesEachBadFlag(t *testing.T) {
	dir := t.TempDir()
	_, err := ParseRun(append(tools(t), "--scenarios", "scaleout", "--k1m", filepath.Join(dir, "k1m"), "--images-dir", dir,
		"--scaleout-data-root", "relative", "--scaleout-server-memory", "3G", "--workers", "2"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, flag := range []string{"--k1m", "--images-dir", "--scaleout-data-root", "--scaleout-server-memory", "--workers"} {
		if !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("error does not name %s:\n%v", flag, err)
		}
	}
}
