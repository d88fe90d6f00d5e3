package proc

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestParseGCTrace(t *testing.T) {
	cases := []struct {
		line string
		want time.Duration
		ok   bool
	}{
		{"gc 7 @1.234s 3%: 0.020+1.5+0.010 ms clock, 0.080+0.40/2.9/0.70+0.050 ms cpu, 4->4->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P",
			3430 * time.Microsecond, true}, // 0.08+0.4+2.9+0.05, idle 0.7 left out
		{"gc 12 @30.001s 1%: 0.1+10+0.2 ms clock, 0.2+5/20/0+0.4 ms cpu, 100->120->60 MB, 120 MB goal, 1 MB stacks, 0 MB globals, 2 P (forced)",
			25600 * time.Microsecond, true},
		{"I1122 04:00:00.000000 1 server.go:1] gc started", 0, false},
		{"gc 1 @0.1s 0%: garbled", 0, false},
	}
	for _, tc := range cases {
		got, ok := ParseGCTrace(tc.line)
		if ok != tc.ok || (ok && (got-tc.want).Abs() > time.Microsecond) {
			t.Errorf("ParseGCTrace(%q) = %v, %v; want %v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// utime 250 ticks, stime 150 ticks: 4 s; the command holds ") (".
	stat := "1234 (kube) (apiserver) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 12 0 1000 100000 2000"
	got, err := ParseStatCPU(stat)
	if err != nil || got != 4*time.Second {
		t.Errorf("ParseStatCPU = %v, %v; want 4s", got, err)
	}
	if _, err := ParseStatCPU("garbage"); err == nil {
		t.Errorf("ParseStatCPU(garbage) did not fail")
	}
}

func TestParseStatusMemory(t *testing.T) {
	status := "Name:\tetcd\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t9\n"
	rss, peak := ParseStatusMemory(status)
	if rss != 1<<20 || peak != 2<<20 {
		t.Errorf("ParseStatusMemory = %d, %d; want %d, %d", rss, peak, 1<<20, 2<<20)
	}
}

func TestReadUsageOfThisProcess(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) { // burn some CPU so it is not zero
	}
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU <= 0 || u.RSS <= 0 || u.PeakRSS < u.RSS {
		t.Errorf("ReadUsage(self) = %+v: want CPU > 0, RSS > 0, peak >= RSS", u)
	}
}

func TestDescendants(t *testing.T) {
	// 1 init, 10 k1m server, 11 and 12 its children, 13 a grandchild, 20 elsewhere.
	parents := map[int]int{1: 0, 10: 1, 11: 10, 12: 10, 13: 11, 20: 1}
	if got, want := Descendants(10, parents), []int{10, 11, 12, 13}; !slices.Equal(got, want) {
		t.Errorf("Descendants(10) = %v, want %v", got, want)
	}
	if got, want := Descendants(20, parents), []int{20}; !slices.Equal(got, want) {
		t.Errorf("Descendants(20) = %v, want %v", got, want)
	}
}

func TestName(t *testing.T) {
	cases := []struct {
		argv []string
		own  bool
		want string
	}{
		{[]string{"/work/_output/stock/bin/k1m", "server", "--data-dir=/d"}, true, "k1m server"},
		{[]string{"/work/_output/stock/bin/k1m", "kube-apiserver", "--secure-port=6443"}, true, "k1m kube-apiserver"},
		{[]string{"/work/_output/bin/k1m", "--help"}, true, "k1m"},
		{[]string{"containerd", "--config", "/c.toml"}, false, "containerd"},
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io"}, false, "containerd-shim-runc-v2"},
		{nil, false, "?"},
	}
	for _, tc := range cases {
		if got := Name(tc.argv, tc.own); got != tc.want {
			t.Errorf("Name(%q, %v) = %q, want %q", tc.argv, tc.own, got, tc.want)
		}
	}
}

func TestParseStatParent(t *testing.T) {
	got, err := ParseStatParent("4242 (k1m (server)) S 4200 4242 4242 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 12 0")
	if err != nil || got != 4200 {
		t.Errorf("ParseStatParent = %d, %v; want 4200", got, err)
	}
	if _, err := ParseStatParent("garbled"); err == nil {
		t.Error("ParseStatParent(garbled): want an error")
	}
}
