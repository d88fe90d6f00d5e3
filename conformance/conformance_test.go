package conformance

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

const sampleJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="1">
  <testsuite name="Kubernetes e2e suite" tests="4">
    <testcase name="[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]" status="passed" time="10.5"></testcase>
    <testcase name="[sig-network] DNS should provide DNS for services  [Conformance]" status="failed" time="300">
      <failure message="timed out waiting for DNS" type="failed">dns.go:123 lookups failed</failure>
      <system-out>probe log</system-out>
    </testcase>
    <testcase name="[sig-apps] Deployment should be slow [Slow]" status="skipped"><skipped message="skipped"></skipped></testcase>
    <testcase name="[SynchronizedBeforeSuite]" status="passed"></testcase>
  </testsuite>
</testsuites>`

func TestParseJUnitCountsAndBuildsSonobuoyTree(t *testing.T) {
	res, err := ParseJUnit(strings.NewReader(sampleJUnit), "results/global/junit_01.xml")
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed != 1 || res.Failed != 1 || res.Skipped != 1 {
		t.Fatalf("passed/failed/skipped = %d/%d/%d, want 1/1/1 (suite nodes not counted)", res.Passed, res.Failed, res.Skipped)
	}
	if len(res.Failures) != 1 || !strings.Contains(res.Failures[0], "DNS should provide DNS for services") {
		t.Fatalf("failures %v", res.Failures)
	}
	if res.Tree.Name != "e2e" || res.Tree.Status != StatusFailed || res.Tree.Metadata["type"] != "summary" {
		t.Fatalf("plugin item %+v", res.Tree)
	}
	file := res.Tree.Items[0]
	if file.Metadata["file"] != "results/global/junit_01.xml" || len(file.Items) != 4 {
		t.Fatalf("file item %+v", file)
	}
	failed := file.Items[1]
	if failed.Status != StatusFailed || failed.Details["failure"] != "timed out waiting for DNS" || failed.Details["system-out"] != "probe log" {
		t.Fatalf("failed item %+v", failed)
	}
	sum := res.Summary()
	for _, want := range []string{"Status: failed", "Total: 3", "Passed: 1", "Failed: 1", "Skipped: 1", "Failed tests:\n  [sig-network] DNS"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

func TestParseJUnitRefusesAnEmptyReport(t *testing.T) {
	if _, err := ParseJUnit(strings.NewReader(`<testsuites><testsuite></testsuite></testsuites>`), "x"); err == nil {
		t.Fatal("a report without test cases was accepted")
	}
	if _, err := ParseJUnit(strings.NewReader(`not xml`), "x"); err == nil {
		t.Fatal("a broken report was accepted")
	}
}

func TestModesMatchSonobuoyAndRefuseUnknown(t *testing.T) {
	if m, _ := ModeNamed("certified-conformance"); m.Focus != `\[Conformance\]` || m.Skip != "" {
		t.Errorf("certified-conformance: %+v", m)
	}
	if m, _ := ModeNamed("non-disruptive-conformance"); m.Skip != `\[Disruptive\]|NoExecuteTaintManager` {
		t.Errorf("non-disruptive-conformance: %+v", m)
	}
	_, err := ModeNamed("fast")
	if err == nil || !strings.Contains(err.Error(), "--mode") || !strings.Contains(err.Error(), "certified-conformance") {
		t.Fatalf("unknown mode error %v", err)
	}
}

func TestCuratedFocusMatchesEachSpecName(t *testing.T) {
	re := regexp.MustCompile(Modes["k1m-curated"].Focus)
	for _, name := range CuratedFocus {
		full := "[sig-x] " + name + " [Conformance]"
		if !re.MatchString(full) {
			t.Errorf("curated focus does not match %q", full)
		}
	}
	if re.MatchString("[sig-node] Pods should be submitted and removed [Conformance]") {
		t.Error("curated focus matches a spec it does not list")
	}
}

func TestWorkerLinesRoundTrip(t *testing.T) {
	var out bytes.Buffer
	srv := httptest.NewServer(progressHandler(&out))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/progress", "application/json", strings.NewReader(`{"msg":"PASSED x","total":5,"completed":2,"failed":1,"failures":["y"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	p, done := parseWorkerLine(strings.TrimSpace(out.String()))
	if p == nil || done != "" || p.Total != 5 || p.Completed != 2 || p.Failed != 1 || p.Msg != "PASSED x" {
		t.Fatalf("progress line %q parsed as %+v", out.String(), p)
	}
	if resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{")); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad JSON: %v %v", resp.StatusCode, err)
	}
	if resp, err := http.Get(srv.URL); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", resp.StatusCode, err)
	}
	if p, done := parseWorkerLine(donePrefix + "/tmp/sonobuoy/results/e2e.tar.gz"); p != nil || done != "/tmp/sonobuoy/results/e2e.tar.gz" {
		t.Errorf("done line: %+v %q", p, done)
	}
	if p, done := parseWorkerLine("some other log line"); p != nil || done != "" {
		t.Error("an unrelated line was read as progress")
	}
}

func TestWorkerAnnouncesTheDoneFile(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	go func() {
		Worker(ctx, "127.0.0.1:0", dir, w)
		w.Close()
	}()
	writeFile(t, dir+"/done", dir+"/e2e.tar.gz")
	line, err := readLine(r)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if _, done := parseWorkerLine(line); done != dir+"/e2e.tar.gz" {
		t.Fatalf("worker printed %q", line)
	}
}

func TestPodCarriesModeAndRepoList(t *testing.T) {
	spec := RunSpec{Mode: Modes["quick"], Image: Image, RepoList: "promoterE2eRegistry: k1m.local/e2e-test-images\n"}
	_, _, crb, cm, pod := spec.objects()
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["E2E_FOCUS"] != "Pods should be submitted and removed" || env["E2E_PARALLEL"] != "false" || env["E2E_EXTRA_GINKGO_ARGS"] != "" || env["KUBE_TEST_REPO_LIST"] == "" {
		t.Fatalf("e2e env %v", env)
	}
	if !strings.Contains(env["E2E_EXTRA_ARGS"], "--progress-report-url=http://localhost:8099/progress") {
		t.Errorf("progress URL missing: %q", env["E2E_EXTRA_ARGS"])
	}
	if cm.Data["repo-list.yaml"] != spec.RepoList || crb.RoleRef.Name != "cluster-admin" || crb.Subjects[0].Namespace != Namespace {
		t.Errorf("config map %v / binding %+v", cm.Data, crb)
	}
	spec.RepoList = ""
	_, _, _, _, pod = spec.objects()
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "KUBE_TEST_REPO_LIST" {
			t.Error("KUBE_TEST_REPO_LIST set without a repo list")
		}
	}
}

func TestRunFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "nope", "--kubeconfig", "k"}, "--mode"},
		{[]string{"--mode", "quick"}, "--kubeconfig"},
		{[]string{"--kubeconfig", "k", "--timeout", "-1s"}, "--timeout"},
		{[]string{"--kubeconfig", "k", "extra"}, "no arguments"},
		{[]string{"--kubeconfig", "k", "--procs", "4"}, "--procs"},
		{[]string{"--kubeconfig", "k", "--parallel", "--procs", "-2"}, "--procs"},
		{[]string{"--kubeconfig", "k", "--skip", `[Serial]|(`}, "--skip"},
		{[]string{"--kubeconfig", "k", "--focus", `Lease(`}, "--focus"},
	} {
		t.Setenv("KUBECONFIG", "")
		_, _, err := parseRunFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %s", c.args, err, c.want)
		}
	}
	f, m, err := parseRunFlags([]string{"--kubeconfig", "k", "--mode", "certified-conformance", "--focus", "Lease", "--parallel", "--procs", "5"}, io.Discard)
	if err != nil || m.Focus != "Lease" || !m.Parallel || m.Procs != 5 || f.kubeconfig != "k" {
		t.Fatalf("%+v %+v %v", f, m, err)
	}
	_, _, _, _, pod := RunSpec{Mode: m}.objects()
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "E2E_EXTRA_GINKGO_ARGS" && e.Value != "--procs=5" {
			t.Errorf("E2E_EXTRA_GINKGO_ARGS %q, want --procs=5", e.Value)
		}
	}
}

func TestProgressStateReadsOnlyNewWorkerLines(t *testing.T) {
	r := Runner{Log: io.Discard}
	var st progressState
	log := progressPrefix + `{"msg":"Test Suite starting","total":411}` + "\n" +
		progressPrefix + `{"msg":"FAILED [sig-x] y","total":411,"failed":1}` + "\n"
	if done := st.readWorker(log, r); done != "" || st.total != 411 {
		t.Fatalf("total %d done %q", st.total, done)
	}
	log += donePrefix + "/tmp/sonobuoy/results/e2e.tar.gz\n"
	if done := st.readWorker(log, r); done != "/tmp/sonobuoy/results/e2e.tar.gz" {
		t.Fatalf("done %q", done)
	}
}

func TestProgressStatePrintsEachFailureOnceFromTheE2ELog(t *testing.T) {
	var out bytes.Buffer
	r := Runner{Log: &out}
	var st progressState
	log := "Will run 3 of 6625 specs\nSSS•SS\n• [FAILED] [2.240 seconds]\n[sig-node] ConfigMap [It] should be consumable via the environment [Conformance]\n" +
		"  Timeline >>\n------------------------------\nSS••"
	st.readE2E(log, r)
	if st.failed != 1 || st.passed != 3 {
		t.Fatalf("failed %d passed %d, want 1 and 3 (bullets on an unfinished line count too)", st.failed, st.passed)
	}
	log += "S\n• [FAILED] [1 seconds]\n[sig-apps] Deployment [It] x [Conformance]\n"
	st.readE2E(log, r)
	if strings.Count(out.String(), "FAILED [sig-node] ConfigMap") != 1 || strings.Count(out.String(), "FAILED [sig-apps] Deployment") != 1 {
		t.Fatalf("failures printed %q", out.String())
	}
	if st.failed != 2 {
		t.Errorf("failed %d, want 2", st.failed)
	}
}

func TestSpecCountOfANamedSpecModeIsChecked(t *testing.T) {
	curated := Modes["k1m-curated"]
	if want := len(CuratedFocus) + len(NetpolFocus); curated.Specs != want || len(NetpolFocus) == 0 {
		t.Fatalf("k1m-curated expects %d specs, want %d (the curated and the NetworkPolicy specs)", curated.Specs, want)
	}
	if err := checkSpecCount(curated, Results{Passed: curated.Specs - 1}); err == nil || !strings.Contains(err.Error(), "no longer matches") {
		t.Errorf("a curated run one spec short passed the check: %v", err)
	}
	if err := checkSpecCount(curated, Results{Passed: curated.Specs, Skipped: 7000}); err != nil {
		t.Errorf("a whole curated run failed the check: %v", err)
	}
	if err := checkSpecCount(Modes["certified-conformance"], Results{Passed: 3}); err != nil {
		t.Errorf("a mode without a spec count was checked: %v", err)
	}
	_, m, err := parseRunFlags([]string{"--kubeconfig", "k", "--mode", "k1m-curated", "--focus", "Lease"}, io.Discard)
	if err != nil || m.Specs != 0 {
		t.Errorf("--focus kept the mode's spec count %d (%v)", m.Specs, err)
	}
}

func TestBulletCounterFollowsAGrowingLog(t *testing.T) {
	path := t.TempDir() + "/e2e.log"
	var c bulletCounter
	if err := c.update(path); err == nil {
		t.Fatal("no error for a missing e2e.log")
	}
	bullet := []byte("•")
	for _, step := range []struct {
		write string
		want  int
	}{
		{"Will run 5 of 6625 specs\nSSS•S", 1},
		{"•" + string(bullet[:1]), 2}, // the log ends inside a bullet
		{string(bullet[1:]) + "SS", 3},
		{"", 3},
		{"\n• [FAILED] [2.2 seconds]\nx\n••", 6},
	} {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(step.write)
		f.Close()
		if err := c.update(path); err != nil || c.n != step.want {
			t.Fatalf("after %q: %d bullets (%v), want %d", step.write, c.n, err, step.want)
		}
	}
}

func TestWorkerPrintsBulletsAndRunnerCountsThem(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/e2e.log", "Will run 3 of 6625 specs\nSS••S")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	go func() {
		Worker(ctx, "127.0.0.1:0", dir, w)
		w.Close()
	}()
	line, err := readLine(r)
	if err != nil {
		t.Fatal(err)
	}
	var st progressState
	st.readWorker(line+"\n", Runner{Log: io.Discard})
	st.readE2E("Will run 3 of 6625 specs\n", Runner{Log: io.Discard}) // the container log: no line of bullets yet
	if st.bullets != 2 || st.passed != 2 {
		t.Fatalf("worker line %q: %d bullets, %d passed, want 2 and 2", line, st.bullets, st.passed)
	}
}
