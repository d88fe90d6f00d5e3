// Package proc runs the processes a benchmark measures (etcd,
// kube-apiserver, kube-controller-manager, kwok) and reads what they cost
// from /proc and from the Go runtime's GC trace: CPU time, resident memory
// and the CPU spent in garbage collection.
package proc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// Process is a started child whose stderr is scanned for GC trace lines
// (GODEBUG=gctrace=1) and otherwise copied to its log file.
type Process struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu      sync.Mutex
	gcCPU   time.Duration // CPU of GC cycles traced so far
	gcCount int
}

// Start runs path with args and extra environment, logging to logPath.
// GODEBUG=gctrace=1 is added so GC CPU can be accounted.
func Start(ctx context.Context, name, path string, args, env []string, logPath string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(append(os.Environ(), env...), "GODEBUG=gctrace=1")
	cmd.Stdout = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &Process{Name: name, cmd: cmd, done: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		p.scan(stderr, logFile)
		close(scanned)
	}()
	go func() {
		<-scanned
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *Process) scan(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if cpu, ok := ParseGCTrace(line); ok {
			p.mu.Lock()
			p.gcCPU += cpu
			p.gcCount++
			p.mu.Unlock()
			continue
		}
		fmt.Fprintln(log, line)
	}
}

// PID of the process.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit error once Done is closed.
func (p *Process) Err() error { return p.err }

// Stop sends SIGTERM and waits for the exit (SIGKILL after 20 s).
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
	}
}

// Usage is what a process has cost up to a moment.
type Usage struct {
	CPU     time.Duration // user + system
	RSS     int64         // resident now, bytes
	PeakRSS int64         // high-water mark, bytes
	GCCPU   time.Duration // CPU of the GC cycles traced
	GCs     int
}

// Usage reads the process's counters now.
func (p *Process) Usage() (Usage, error) {
	u, err := ReadUsage(p.PID())
	if err != nil {
		return u, fmt.Errorf("%s: %w", p.Name, err)
	}
	p.mu.Lock()
	u.GCCPU, u.GCs = p.gcCPU, p.gcCount
	p.mu.Unlock()
	return u, nil
}

// Sub is the usage between an earlier reading and u (peak stays u's).
func (u Usage) Sub(earlier Usage) Usage {
	return Usage{CPU: u.CPU - earlier.CPU, RSS: u.RSS, PeakRSS: u.PeakRSS,
		GCCPU: u.GCCPU - earlier.GCCPU, GCs: u.GCs - earlier.GCs}
}

// Add is the usage of two processes together.
func (u Usage) Add(other Usage) Usage {
	return Usage{CPU: u.CPU + other.CPU, RSS: u.RSS + other.RSS, PeakRSS: u.PeakRSS + other.PeakRSS,
		GCCPU: u.GCCPU + other.GCCPU, GCs: u.GCs + other.GCs}
}

// ReadUsage reads CPU time and memory of pid from /proc.
func ReadUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	cpu, err := ParseStatCPU(string(stat))
	if err != nil {
		return Usage{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	rss, peak := ParseStatusMemory(string(status))
	return Usage{CPU: cpu, RSS: rss, PeakRSS: peak}, nil
}

// ParseStatCPU returns utime+stime from the text of /proc/PID/stat. The
// command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func ParseStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("unexpected /proc stat format: %q", stat)
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat format: %q", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc stat field %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// ParseStatusMemory returns VmRSS and VmHWM (bytes) from /proc/PID/status.
func ParseStatusMemory(status string) (rss, peak int64) {
	for _, line := range strings.Split(status, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak
}

// ParseGCTrace reads the CPU a GC cycle cost from one gctrace line:
//
//	gc 7 @1.2s 3%: 0.02+1.5+0.01 ms clock, 0.08+0.4/2.9/0.7+0.05 ms cpu, 4->4->2 MB, ...
//
// The cpu part is sweep-termination + assist/background/idle + mark-termination.
// Idle mark work only runs on otherwise idle processors, so it is not a cost
// and is left out, as the runtime's GC CPU limiter leaves it out.
func ParseGCTrace(line string) (time.Duration, bool) {
	if !strings.HasPrefix(line, "gc ") {
		return 0, false
	}
	for _, part := range strings.Split(line, ", ") {
		cpu, ok := strings.CutSuffix(part, " ms cpu")
		if !ok {
			continue
		}
		phases := strings.Split(cpu, "+")
		if len(phases) != 3 {
			return 0, false
		}
		mark := strings.Split(phases[1], "/")
		if len(mark) != 3 {
			return 0, false
		}
		var ms float64
		for _, s := range []string{phases[0], mark[0], mark[1], phases[2]} {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return 0, false
			}
			ms += v
		}
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	return 0, false
}
