package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/testutil"
)

// TestFaults runs the campaign: `make faults` (every scenario, or
// SCENARIOS=a,b and REPEAT=n) and `make faults-test` (the CI subset, in
// make test). It needs root, `make build` and `make images`; without
// K1M_FAULTS=1 it is skipped, so that `go test ./...` starts no cluster.
//
// The cluster is started once and kept across scenarios while each
// leaves it whole (a scenario that does not converge gets a fresh cluster
// for the next one). The table goes to stdout and
// _output/faults/results.md, and with FAULTS_DOCS=1 into docs/ha.md.
func TestFaults(t *testing.T) {
	if os.Getenv("K1M_FAULTS") != "1" {
		t.Skip("the fault campaign runs from make faults or make faults-test (K1M_FAULTS=1; root, a built binary and images)")
	}
	if os.Getuid() != 0 {
		t.Fatal("the fault campaign needs root (network namespaces, ip6tables, mounts)")
	}
	scenarios, err := Select(os.Getenv("FAULTS_SCENARIOS"))
	if err != nil {
		t.Fatal(err)
	}
	repeat := 1
	if v := os.Getenv("FAULTS_REPEAT"); v != "" {
		if repeat, err = strconv.Atoi(v); err != nil || repeat < 1 {
			t.Fatalf("REPEAT=%s: want a number of runs of each scenario, from 1", v)
		}
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	c := &campaign{t: t, root: root, opts: Options{K1M: filepath.Join(root, "_output", "bin", "k1m"),
		ImagesDir: filepath.Join(root, "_output", "images"), ClusterDir: filepath.Join(root, "_output", "faults", "cluster"),
		EtcdDiskSize: "1g", Out: os.Stdout}}
	if NeedsEtcdDisk(scenarios) {
		c.opts.EtcdDisk = DiskServer()
	}
	if v := os.Getenv("FAULTS_PARTITIONS"); v != "" {
		c.opts.Partitions = strings.Split(v, ",")
		if err := RequireMovable(scenarios, c.opts.Partitions); err != nil {
			t.Fatal(err)
		}
	}
	if FromEarlierRelease(scenarios) {
		from := os.Getenv("FAULTS_FROM_K1M")
		if from == "" {
			t.Fatal("the upgrade scenario needs the earlier release's binary in FAULTS_FROM_K1M (make upgrade-test builds it from UPGRADE_FROM)")
		}
		c.opts.FromK1M = from
		c.opts.ViaK1M = os.Getenv("FAULTS_VIA_K1M")
		c.opts.DatabaseImage = os.Getenv("FAULTS_DATABASE_IMAGE")
		if c.opts.ViaK1M == "" || c.opts.DatabaseImage == "" {
			t.Fatal("the upgrade scenario needs the release in between's binary in FAULTS_VIA_K1M and the database's image archive in FAULTS_DATABASE_IMAGE (make upgrade-test builds them from UPGRADE_VIA and with the conformance images)")
		}
	}
	began := time.Now()
	ctx, cancel := testutil.Budget(t, 85*time.Minute)
	defer cancel()
	// Deferred first: a cluster whose up failed (t.Fatal) is taken down too,
	// not left running for the next test.
	defer c.down()
	c.up(ctx)
	var results []Result
	runs := 0
	for rep := 1; rep <= repeat; rep++ {
		for _, s := range scenarios {
			runs++
			r := c.f.Run(ctx, s, fmt.Sprintf("faults-%s-%d", s.Name, rep))
			t.Logf("%s (run %d) took %s: acknowledged %d, missing %d, stall %s, NotReady %v, converged %s, failed: %v",
				s.Name, rep, r.Took, r.Acked, r.Missing, r.Stall, r.NotReady, converge(r.Converge), r.Failed)
			for _, e := range r.Evidence {
				t.Logf("  %s", e)
			}
			results = append(results, r)
			if r.Converge < 0 && runs < repeat*len(scenarios) {
				kept := fmt.Sprintf("%s-after-%s-%d", c.opts.ClusterDir, s.Name, rep)
				t.Logf("%s left the cluster broken: a fresh cluster for the next scenario; its logs are kept in %s", s.Name, kept)
				c.down()
				os.RemoveAll(kept)
				if err := os.Rename(c.opts.ClusterDir, kept); err != nil {
					t.Error(err)
				}
				c.opts.FromK1M, c.opts.ViaK1M = "", "" // the earlier releases only for the first cluster
				c.up(ctx)
			}
		}
	}
	table := Table(results)
	fmt.Printf("\nfault campaign, %d scenario run(s) in %s:\n\n%s\n", len(results), time.Since(began).Round(time.Second), table)
	c.write(table, Evidence(results), time.Since(began))
	for _, r := range results {
		if !r.Passed() {
			t.Errorf("%s: %s", r.Scenario, strings.Join(r.Failed, "; "))
		}
	}
}

// campaign is the test's cluster across scenarios.
type campaign struct {
	t    *testing.T
	root string
	opts Options
	f    *Fixture
}

// up starts a fresh cluster on a fresh data root.
func (c *campaign) up(ctx context.Context) {
	dataRoot, err := os.MkdirTemp("", "k1m-faults-")
	if err != nil {
		c.t.Fatal(err)
	}
	c.opts.DataRoot = dataRoot
	os.RemoveAll(c.opts.ClusterDir)
	f, err := Start(ctx, c.opts)
	c.f = f
	if err != nil {
		c.t.Fatalf("cluster up: %v", err)
	}
}

// down takes the cluster down and removes its data.
func (c *campaign) down() {
	if c.f == nil {
		return
	}
	if err := c.f.Down(context.Background()); err != nil {
		c.t.Errorf("cluster down: %v", err)
	}
	os.RemoveAll(c.opts.DataRoot)
	c.f = nil
}

// write keeps the table in _output/faults/results.md and, with
// FAULTS_DOCS=1, in docs/ha.md.
func (c *campaign) write(table, evidence string, took time.Duration) {
	commit, err := exec.Command("git", "-C", c.root, "describe", "--always", "--dirty", "--exclude=*", "--abbrev=7").Output()
	if err != nil {
		commit = []byte("unknown")
	}
	stamped := Stamp(strings.TrimSpace(string(commit)), took, or(os.Getenv("FAULTS_SCENARIOS"), "all"), or(os.Getenv("FAULTS_REPEAT"), "1"), os.Getenv("FAULTS_PARTITIONS"), table)
	results := filepath.Join(c.root, "_output", "faults", "results.md")
	if err := os.MkdirAll(filepath.Dir(results), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(results, []byte(stamped+"\n"+evidence), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if os.Getenv("FAULTS_DOCS") == "1" {
		if err := UpdateDoc(filepath.Join(c.root, "docs", "ha.md"), stamped); err != nil {
			c.t.Error(err)
		}
	}
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
