package tool

import (
	"bytes"
	"strings"
	"testing"
)

const sampleJSON = `{"Action":"run","Package":"k8s.io/a","Test":"TestOK"}
{"Action":"pass","Package":"k8s.io/a","Test":"TestOK"}
{"Action":"output","Package":"k8s.io/a","Output":"ok  \tk8s.io/a\t0.1s\n"}
{"Action":"pass","Package":"k8s.io/a"}
{"Action":"run","Package":"k8s.io/b","Test":"TestFlaky"}
{"Action":"output","Package":"k8s.io/b","Test":"TestFlaky","Output":"    x_test.go:3: Unexpected number of events: 0\n"}
{"Action":"run","Package":"k8s.io/b","Test":"TestFlaky/sub"}
{"Action":"fail","Package":"k8s.io/b","Test":"TestFlaky/sub"}
{"Action":"fail","Package":"k8s.io/b","Test":"TestFlaky"}
{"Action":"output","Package":"k8s.io/b","Output":"FAIL\tk8s.io/b\t1.0s\n"}
{"Action":"fail","Package":"k8s.io/b"}
{"Action":"output","Package":"k8s.io/c","Output":"FAIL\tk8s.io/c [build failed]\n"}
{"Action":"fail","Package":"k8s.io/c"}
`

func TestCollectTestResults(t *testing.T) {
	var out bytes.Buffer
	res, err := collectTestResults(strings.NewReader(sampleJSON), &out)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.failedTests["k8s.io/b"]; len(got) != 1 || got[0] != "TestFlaky" {
		t.Errorf("failed tests of k8s.io/b = %v, want [TestFlaky] (subtests are retried with their parent)", got)
	}
	if len(res.failedTests["k8s.io/a"]) != 0 {
		t.Errorf("k8s.io/a passed but has failures %v", res.failedTests["k8s.io/a"])
	}
	if len(res.failedPackages) != 1 || res.failedPackages[0] != "k8s.io/c" {
		t.Errorf("failed packages = %v, want [k8s.io/c] (it failed outside any test)", res.failedPackages)
	}
	for _, want := range []string{"ok  \tk8s.io/a", "Unexpected number of events: 0", "FAIL\tk8s.io/c"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
