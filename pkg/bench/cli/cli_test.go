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
	dir := t.TempDir()
	var args []string
	for _, name := range []string{"kwok", "kwok-stages", "benchplot"} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, nil, 0o755)
		args = append(args, "--"+name, path)
	}
	return args
}

func TestParseRunProfileDefaultsAndOverrides(t *testing.T) {
	o, err := ParseRun(append(tools(t), "--profile", "full", "--duration", "7s", "--kwok-steps", "10,20", "--scenarios", "lease,kwok", "--results", "/tmp/x"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Rounds != Profiles["full"].Rounds || o.Lease.Leases != 10000 {
		t.Errorf("profile defaults not applied: rounds %d, leases %d", o.Rounds, o.Lease.Leases)
	}
	if o.Lease.Duration != 7*time.Second || o.Etcd.Duration != 7*time.Second {
		t.Errorf("--duration not applied to both floods: %v %v", o.Lease.Duration, o.Etcd.Duration)
	}
	if len(o.Kwok.Steps) != 2 || o.Kwok.Steps[1] != 20 || strings.Join(o.Scenarios, ",") != "lease,kwok" || o.Results != "/tmp/x" {
		t.Errorf("overrides not applied: %+v %v %s", o.Kwok.Steps, o.Scenarios, o.Results)
	}
}

func TestParseRunRejectsBadInputNamingTheFlag(t *testing.T) {
	cases := map[string][]string{
		"--profile":    {"--profile", "huge"},
		"--kwok-steps": {"--kwok-steps", "5000,1000"},
		"--scenarios":  {"--scenarios", "lease,nodes"},
		"--workers":    {"--leases", "10", "--workers", "20"},
		"--long-renew": {"--long-renew", "1500ms"},
		"--leases":     {"--leases", "-5"},
	}
	for flag, args := range cases {
		_, err := ParseRun(append(tools(t), args...))
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("ParseRun(%q) = %v; want an error naming %s", args, err, flag)
		}
	}
}

func TestParseRunWantsTheBuiltTools(t *testing.T) {
	_, err := ParseRun([]string{"--scenarios", "kwok", "--kwok", "/nonexistent/kwok"})
	want := []string{
		"--benchplot is empty: give the path k1m-build bench-tools built (make bench does)",
		"--kwok /nonexistent/kwok: stat /nonexistent/kwok: no such file or directory (k1m-build bench-tools builds it)",
		"--kwok-stages is empty: give the path k1m-build bench-tools built (make bench does)",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got %v\nwant %s", err, strings.Join(want, "\n"))
	}
	// Without the kwok scenario, kwok is not needed.
	args := tools(t)
	if _, err := ParseRun([]string{"--scenarios", "lease", args[4], args[5]}); err != nil {
		t.Errorf("lease only, with --benchplot: %v", err)
	}
}

func TestScaleOutOnlyWhenNamed(t *testing.T) {
	o, err := ParseRun(tools(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Scenarios, ",") != "lease,etcd,kwok,watchcache" {
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
