package multicall

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"k1m.dev/k1m/pkg/testutil"
)

// The test binary is also the fake component the supervisor starts: with
// fakeRecordEnv set it appends what it was started with to that file,
// then exits with status 3 (fakeModeEnv=exit) or waits for SIGTERM
// (fakeModeEnv=wait).
const (
	fakeRecordEnv = "K1M_TEST_FAKE_COMPONENT_RECORD"
	fakeModeEnv   = "K1M_TEST_FAKE_COMPONENT_MODE"
)

// start is one line of the fake component's record.
type start struct {
	PID        int      `json:"pid"`
	Args       []string `json:"args,omitempty"`
	GOMEMLIMIT string   `json:"gomemlimit,omitempty"`
	Terminated bool     `json:"terminated,omitempty"` // the line a waiting fake writes on SIGTERM
}

func TestMain(m *testing.M) {
	if record := os.Getenv(fakeRecordEnv); record != "" {
		os.Exit(fakeComponent(record, os.Getenv(fakeModeEnv)))
	}
	if mode, ok := os.LookupEnv(selfBinaryModeEnv); ok {
		os.Exit(printSelfBinary(mode))
	}
	os.Exit(m.Run())
}

func fakeComponent(record, mode string) int {
	terminated := make(chan os.Signal, 1)
	signal.Notify(terminated, syscall.SIGTERM)
	appendRecord(record, start{PID: os.Getpid(), Args: os.Args[1:], GOMEMLIMIT: os.Getenv("GOMEMLIMIT")})
	if mode == "exit" {
		return 3
	}
	<-terminated
	appendRecord(record, start{PID: os.Getpid(), Terminated: true})
	return 0
}

func appendRecord(path string, s start) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	line, _ := json.Marshal(s)
	if _, err := f.Write(append(line, '\n')); err != nil {
		panic(err)
	}
}

func readRecord(t *testing.T, path string) []start {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []start
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		var s start
		if err := json.Unmarshal(lines.Bytes(), &s); err != nil {
			t.Fatalf("%s: %q: %v", path, lines.Text(), err)
		}
		out = append(out, s)
	}
	return out
}

// fake is a supervised fake component and what it reported.
type fake struct {
	record  string
	exits   chan Exit
	cancel  context.CancelFunc
	stopped <-chan struct{}
}

var fakeArgs = []string{"--leader-elect=true", "--v=2"}

func superviseFake(t *testing.T, mode string, backoff Backoff) *fake {
	t.Helper()
	f := &fake{record: filepath.Join(t.TempDir(), "starts"), exits: make(chan Exit, 100)}
	// Inherited, and overridden by Env: the child must see Env's value.
	t.Setenv("GOMEMLIMIT", "999MiB")
	t.Setenv(fakeRecordEnv, f.record)
	t.Setenv(fakeModeEnv, mode)
	binary, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.stopped = Supervise(ctx, Supervised{Name: "kube-controller-manager", Args: fakeArgs, Env: []string{"GOMEMLIMIT=123456"},
		Backoff: backoff, OnExit: func(e Exit) { f.exits <- e }, binary: binary})
	t.Cleanup(func() {
		cancel()
		<-f.stopped
	})
	return f
}

// nextExits waits for n exits and returns them with Ran cleared (it
// varies from run to run).
func (f *fake) nextExits(t *testing.T, n int) []Exit {
	t.Helper()
	var out []Exit
	for len(out) < n {
		select {
		case e := <-f.exits:
			e.Ran = 0
			out = append(out, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d exits reported, want %d: %v", len(out), n, out)
		}
	}
	return out
}

// stop cancels the server's context and waits for the supervisor.
func (f *fake) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	select {
	case <-f.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor had not stopped 10 s after its context ended")
	}
}

func wantStart(pid int) start {
	return start{PID: pid, Args: append([]string{"kube-controller-manager"}, fakeArgs...), GOMEMLIMIT: "123456"}
}

func TestSuperviseRestartsAnExitedChildWithBackoff(t *testing.T) {
	f := superviseFake(t, "exit", Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, ResetAfter: time.Hour})
	got := f.nextExits(t, 5)
	f.stop(t)
	status := "exit status 3"
	want := []Exit{
		{Name: "kube-controller-manager", Status: status, Next: 10 * time.Millisecond},
		{Name: "kube-controller-manager", Status: status, Next: 20 * time.Millisecond},
		{Name: "kube-controller-manager", Status: status, Next: 40 * time.Millisecond},
		{Name: "kube-controller-manager", Status: status, Next: 40 * time.Millisecond},
		{Name: "kube-controller-manager", Status: status, Next: 40 * time.Millisecond},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exits\n%v\nwant\n%v", got, want)
	}
	starts := readRecord(t, f.record)
	if len(starts) < len(want) {
		t.Fatalf("%d starts recorded, want at least %d", len(starts), len(want))
	}
	for i, s := range starts {
		if w := wantStart(s.PID); !reflect.DeepEqual(s, w) {
			t.Errorf("start %d: %+v, want %+v", i+1, s, w)
		}
	}
}

func TestSuperviseRestartsAKilledChildAndStopsWithItsContext(t *testing.T) {
	f := superviseFake(t, "wait", Backoff{Initial: 10 * time.Millisecond, Max: time.Second, ResetAfter: time.Hour})
	first := waitStarts(t, f.record, 1)[0]
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := f.nextExits(t, 1)
	if want := []Exit{{Name: "kube-controller-manager", Status: "signal: killed", Next: 10 * time.Millisecond}}; !reflect.DeepEqual(got, want) {
		t.Errorf("exits %v, want %v", got, want)
	}
	second := waitStarts(t, f.record, 2)[1]
	f.stop(t)
	// Give a wrong restart the time to happen.
	time.Sleep(100 * time.Millisecond)
	want := []start{wantStart(first.PID), wantStart(second.PID), {PID: second.PID, Terminated: true}}
	if got := readRecord(t, f.record); !reflect.DeepEqual(got, want) {
		t.Errorf("record\n%+v\nwant (killed, started again, SIGTERM at the stop and no start after)\n%+v", got, want)
	}
	select {
	case e := <-f.exits:
		t.Errorf("an exit reported after the stop: %v", e)
	default:
	}
}

func TestSuperviseStopsDuringItsBackoff(t *testing.T) {
	f := superviseFake(t, "exit", Backoff{Initial: time.Hour, Max: time.Hour, ResetAfter: time.Hour})
	f.nextExits(t, 1)
	f.stop(t)
	starts := readRecord(t, f.record)
	if want := []start{wantStart(starts[0].PID)}; !reflect.DeepEqual(starts, want) {
		t.Errorf("starts %+v, want only %+v", starts, want)
	}
}

// waitStarts waits for n starts (not counting SIGTERM lines).
func waitStarts(t *testing.T, record string, n int) []start {
	t.Helper()
	var starts []start
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d starts", n), func() error {
		starts = nil
		for _, s := range readRecord(t, record) {
			if !s.Terminated {
				starts = append(starts, s)
			}
		}
		if len(starts) < n {
			return fmt.Errorf("%d starts", len(starts))
		}
		return nil
	})
	return starts
}

func TestBackoffNext(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}
	cases := []struct {
		last, ran, want time.Duration
	}{
		{0, 0, time.Second},                               // the first exit
		{time.Second, 0, 2 * time.Second},                 // a quick exit doubles the wait
		{16 * time.Second, time.Second, 30 * time.Second}, // at most Max
		{30 * time.Second, time.Second, 30 * time.Second},
		{30 * time.Second, time.Minute, time.Second}, // a healthy run resets it
	}
	for _, tc := range cases {
		if got := b.next(tc.last, tc.ran); got != tc.want {
			t.Errorf("next(last %s, ran %s) = %s, want %s", tc.last, tc.ran, got, tc.want)
		}
	}
}

func TestExitString(t *testing.T) {
	e := Exit{Name: "kube-scheduler", Status: "exit status 1", Ran: 1234567 * time.Microsecond, Next: 2 * time.Second}
	want := "kube-scheduler ended (exit status 1) after 1.235s; starting it again in 2s"
	if got := e.String(); got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// With selfBinaryModeEnv set, the test binary prints selfBinary, after
// removing its own file when the mode is "replaced".
const selfBinaryModeEnv = "K1M_TEST_SELF_BINARY"

func printSelfBinary(mode string) int {
	if mode == "replaced" {
		exe, _ := os.Executable()
		if err := os.Remove(exe); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Print(selfBinary())
	return 0
}

func TestSelfBinaryIsThePathUntilTheFileIsReplaced(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mode, want string }{{"same", "COPY"}, {"replaced", "/proc/self/exe"}} {
		copyPath := filepath.Join(t.TempDir(), "k1m")
		if err := os.WriteFile(copyPath, data, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(copyPath)
		cmd.Env = append(os.Environ(), selfBinaryModeEnv+"="+tc.mode)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		want := tc.want
		if want == "COPY" {
			want = copyPath
		}
		if string(out) != want {
			t.Errorf("%s: selfBinary() = %q, want %q", tc.mode, out, want)
		}
	}
}
