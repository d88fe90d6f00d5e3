package conformance

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	serialConformanceSpec = "[sig-scheduling] SchedulerPredicates [Serial] validates resource limits of pods that are allowed to run [Conformance]"
	parallelConformance   = "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]"
	serialOtherSpec       = "[sig-apps] Daemon set [Serial] should run and stop complex daemon with node affinity"
	disruptiveSerialSpec  = "[sig-node] NoExecuteTaintManager Single Pod [Serial] removing taint cancels eviction [Disruptive] [Conformance]"
)

// selects tells whether ginkgo would run spec in a phase: focus matches,
// skip does not, and the label filter, if any, is the Serial label, which
// framework.WithSerial gives exactly the specs whose text holds [Serial].
func selects(t *testing.T, m Mode, spec string) bool {
	t.Helper()
	focus, skip := regexp.MustCompile(m.Focus), regexp.MustCompile("^$")
	if m.Skip != "" {
		skip = regexp.MustCompile(m.Skip)
	}
	switch m.LabelFilter {
	case "":
	case serialLabel:
		if !strings.Contains(spec, "[Serial]") {
			return false
		}
	default:
		t.Fatalf("label filter %q: the test models only %q", m.LabelFilter, serialLabel)
	}
	return focus.MatchString(spec) && !skip.MatchString(spec)
}

func TestParallelCuratedRunsItsSerialSpecInTheSerialPhase(t *testing.T) {
	m := Modes["k1m-curated"]
	m.Parallel = true
	phases := m.Phases()
	daemonSet := "[sig-apps] Daemon set [Serial] should run and stop simple daemon [Conformance]"
	lease := "[sig-node] Lease lease API should be available [Conformance]"
	denyIngress := "[sig-network] Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]"
	if len(phases) != 2 {
		t.Fatalf("phases = %+v, want two", phases)
	}
	if selects(t, phases[0].Mode, daemonSet) || !selects(t, phases[1].Mode, daemonSet) {
		t.Errorf("the curated [Serial] spec must run in the serial phase only: %+v", phases)
	}
	if !selects(t, phases[0].Mode, lease) || selects(t, phases[1].Mode, lease) {
		t.Errorf("a curated spec without [Serial] must run in the parallel phase only: %+v", phases)
	}
	if !selects(t, phases[0].Mode, denyIngress) || selects(t, phases[1].Mode, denyIngress) {
		t.Errorf("a curated NetworkPolicy spec must run in the parallel phase only: %+v", phases)
	}
	_, _, _, _, pod := RunSpec{Mode: phases[1].Mode}.objects()
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "E2E_EXTRA_GINKGO_ARGS" && e.Value != "--label-filter=Serial" {
			t.Errorf("serial phase E2E_EXTRA_GINKGO_ARGS = %q, want --label-filter=Serial", e.Value)
		}
		if e.Name == "E2E_PARALLEL" && e.Value != "false" {
			t.Errorf("serial phase E2E_PARALLEL = %q", e.Value)
		}
	}
}

func TestSerialRunIsOnePhase(t *testing.T) {
	m := Modes["non-disruptive-conformance"]
	phases := m.Phases()
	if len(phases) != 1 || phases[0].Mode != m {
		t.Fatalf("phases of a serial run = %+v, want the mode itself", phases)
	}
}

func TestParallelRunThenItsSerialSpecs(t *testing.T) {
	m := Modes["non-disruptive-conformance"]
	m.Parallel, m.Procs = true, 3
	phases := m.Phases()
	if len(phases) != 2 || phases[0].Name != "parallel" || phases[1].Name != "serial" {
		t.Fatalf("phases = %+v, want parallel then serial", phases)
	}
	par, ser := phases[0].Mode, phases[1].Mode
	if !par.Parallel || par.Procs != 3 || ser.Parallel || ser.Procs != 0 {
		t.Fatalf("parallel phase %+v, serial phase %+v", par, ser)
	}
	for _, c := range []struct {
		spec     string
		par, ser bool
	}{
		{parallelConformance, true, false},
		{serialConformanceSpec, false, true},
		{serialOtherSpec, false, false},      // not [Conformance]: in neither
		{disruptiveSerialSpec, false, false}, // the mode skips it: in neither
	} {
		if got := selects(t, par, c.spec); got != c.par {
			t.Errorf("parallel phase runs %q = %v, want %v", c.spec, got, c.par)
		}
		if got := selects(t, ser, c.spec); got != c.ser {
			t.Errorf("serial phase runs %q = %v, want %v", c.spec, got, c.ser)
		}
	}
}

func TestParallelCertifiedRunsTheDisruptiveSerialSpecsInTheSerialPhase(t *testing.T) {
	m := Modes["certified-conformance"]
	m.Parallel = true
	phases := m.Phases()
	if len(phases) != 2 || phases[0].Mode.Skip != serialSpecs {
		t.Fatalf("phases = %+v, want a parallel phase skipping only [Serial]", phases)
	}
	if !selects(t, phases[1].Mode, disruptiveSerialSpec) || selects(t, phases[0].Mode, disruptiveSerialSpec) {
		t.Errorf("the [Serial] [Disruptive] spec should run in the serial phase only: %+v", phases)
	}
}

func TestSkipOfSerialNeedsNoSerialPhase(t *testing.T) {
	m := Modes["certified-conformance"]
	m.Parallel, m.Skip = true, `\[Serial\]|\[Slow\]`
	phases := m.Phases()
	if len(phases) != 1 || phases[0].Mode.Skip != m.Skip {
		t.Fatalf("phases = %+v, want one parallel phase with the given skip", phases)
	}
}

const phaseOneJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="3" errors="0" failures="0" time="100">
  <testsuite name="Kubernetes e2e suite" package="/usr/local/bin" tests="5" disabled="0" skipped="3" errors="0" failures="0" time="100" timestamp="2026-11-23T03:12:34">
    <properties><property name="ParallelTotal" value="3"></property></properties>
    <testcase name="[SynchronizedBeforeSuite]" status="passed" time="1"></testcase>
    <testcase name="` + parallelConformance + `" status="passed" time="10"><system-err>pod log &amp; more</system-err></testcase>
    <testcase name="` + serialConformanceSpec + `" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="` + serialOtherSpec + `" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[sig-x] not in the mode" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>`

const phaseTwoJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="3" errors="0" failures="1" time="50">
  <testsuite name="Kubernetes e2e suite" package="/usr/local/bin" tests="5" disabled="0" skipped="3" errors="0" failures="1" time="50" timestamp="2026-11-23T04:00:00">
    <properties><property name="ParallelTotal" value="1"></property></properties>
    <testcase name="[SynchronizedBeforeSuite]" status="passed" time="1"></testcase>
    <testcase name="` + parallelConformance + `" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="` + serialConformanceSpec + `" status="failed" time="30"><failure message="limits not enforced" type="failed">predicates.go:1 boom</failure></testcase>
    <testcase name="` + serialOtherSpec + `" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[sig-x] not in the mode" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>`

func TestMergeJUnitKeepsEachSpecOnceWithTheStatusOfThePhaseThatRanIt(t *testing.T) {
	merged, err := mergeJUnit([][]byte{[]byte(phaseOneJUnit), []byte(phaseTwoJUnit)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ParseJUnit(bytes.NewReader(merged), "results/global/junit_01.xml")
	if err != nil {
		t.Fatalf("the merged report does not parse: %v\n%s", err, merged)
	}
	if res.Passed != 1 || res.Failed != 1 || res.Skipped != 2 {
		t.Fatalf("passed/failed/skipped = %d/%d/%d, want 1/1/2:\n%s", res.Passed, res.Failed, res.Skipped, merged)
	}
	if len(res.Failures) != 1 || res.Failures[0] != serialConformanceSpec {
		t.Errorf("failures = %v, want the serial phase's failure", res.Failures)
	}
	if n := len(res.Tree.Items[0].Items); n != 5 {
		t.Errorf("merged report lists %d test cases, want 5 (each once)", n)
	}
	for _, want := range []string{
		`tests="5"`, `failures="1"`, `skipped="2"`, `time="150"`, `timestamp="2026-11-23T03:12:34"`,
		`name="ParallelTotal" value="3"`, `limits not enforced`, `pod log &amp; more`,
	} {
		if !strings.Contains(string(merged), want) {
			t.Errorf("merged report lacks %s:\n%s", want, merged)
		}
	}
}

func TestMergeJUnitOfOnePhaseIsThatReport(t *testing.T) {
	merged, err := mergeJUnit([][]byte{[]byte(phaseOneJUnit)})
	if err != nil || string(merged) != phaseOneJUnit {
		t.Fatalf("one report was changed: %v\n%s", err, merged)
	}
}

func TestMergeJUnitNamesTheBrokenPhase(t *testing.T) {
	_, err := mergeJUnit([][]byte{[]byte(phaseOneJUnit), []byte("<testsuites><testsuite>")})
	if err == nil || !strings.Contains(err.Error(), "phase 2") {
		t.Fatalf("err = %v, want one naming phase 2", err)
	}
}

func TestMergePhasesJoinsLogsAndKeepsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	raws := []string{filepath.Join(dir, "a.tar.gz"), filepath.Join(dir, "b.tar.gz")}
	for i, files := range []map[string][]byte{
		{"junit_01.xml": []byte(phaseOneJUnit), "e2e.log": []byte("parallel log\n"), "done": []byte("x"), "extra.txt": []byte("1")},
		{"junit_01.xml": []byte(phaseTwoJUnit), "e2e.log": []byte("serial log\n"), "done": []byte("x"), "extra.txt": []byte("2")},
	} {
		if err := writeTarGz(raws[i], files); err != nil {
			t.Fatal(err)
		}
	}
	m := Modes["non-disruptive-conformance"]
	m.Parallel = true
	merged, err := mergePhases(raws, m.Phases())
	if err != nil {
		t.Fatal(err)
	}
	log := string(merged["e2e.log"])
	if !regexp.MustCompile(`(?s)phase 1 of 2, parallel.*parallel log\n.*phase 2 of 2, serial.*serial log\n`).MatchString(log) {
		t.Errorf("e2e.log = %q, want both logs in phase order under their headers", log)
	}
	if string(merged["extra.txt"]) != "1" || string(merged["serial-extra.txt"]) != "2" {
		t.Errorf("other files: %q %q, want the first phase's under its name and the second's prefixed", merged["extra.txt"], merged["serial-extra.txt"])
	}
	if _, ok := merged["done"]; ok {
		t.Error("go-runner's done file was kept")
	}
	if _, ok := merged["serial-done"]; ok {
		t.Error("the serial phase's done file was kept")
	}
}

func TestMergePhasesNamesAMissingReport(t *testing.T) {
	raw := filepath.Join(t.TempDir(), "a.tar.gz")
	if err := writeTarGz(raw, map[string][]byte{"e2e.log": []byte("crashed")}); err != nil {
		t.Fatal(err)
	}
	_, err := mergePhases([]string{raw}, Modes["quick"].Phases())
	if err == nil || !strings.Contains(err.Error(), "no junit_01.xml") {
		t.Fatalf("err = %v, want one saying the report is missing", err)
	}
}
