package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k1m.dev/k1m/test/localcluster/network"
)

// stopGrace is how long a SIGTERM stop may take before SIGKILL: a server
// drains kube-apiserver, then stops both etcds.
const stopGrace = 90 * time.Second

// environ is the harness's environment for a k1m process: its own minus
// K1M_TOKEN (a token of the caller's must not reach a node by accident),
// plus extra.
func environ(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "K1M_TOKEN=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startBackground starts node n's command in the background, in its own
// session so that a terminal's signals do not reach it, with stdin from
// /dev/null and its output appended to n's log; its pid goes to n's pid
// file.
func (c *Cluster) startBackground(n Node, cmd Command) error {
	if err := os.MkdirAll(filepath.Dir(n.LogFile), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(n.LogFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	p := exec.Command(cmd.Args[0], cmd.Args[1:]...)
	p.Env = environ(cmd.Env)
	p.Stdout, p.Stderr = log, log
	p.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := network.Start(p, cmd.Netns, cmd.Hostname); err != nil {
		return fmt.Errorf("starting %s: %w", n.Label(), err)
	}
	// Reaped while this process lives (a test's, say): an exited child
	// would stay a zombie, which a liveness check still finds.
	go p.Wait()
	if err := os.WriteFile(n.PidFile, []byte(strconv.Itoa(p.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	c.logf("%s started (pid %d, log %s)", n.Label(), p.Process.Pid, n.LogFile)
	return nil
}

// runForeground runs node n's command until it exits, its output going
// to out and appended to n's log; the error is the command's (an
// *exec.ExitError carries its exit code). A cancelled ctx stops it as
// stopPid does.
func (c *Cluster) runForeground(ctx context.Context, n Node, cmd Command, out io.Writer) error {
	log, err := os.OpenFile(n.LogFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	p := exec.CommandContext(ctx, cmd.Args[0], cmd.Args[1:]...)
	p.Env = environ(cmd.Env)
	w := io.MultiWriter(out, log)
	p.Stdout, p.Stderr = w, w
	p.Cancel = func() error { return p.Process.Signal(syscall.SIGTERM) }
	p.WaitDelay = stopGrace
	if err := network.Start(p, cmd.Netns, cmd.Hostname); err != nil {
		return fmt.Errorf("starting %s: %w", n.Label(), err)
	}
	return p.Wait()
}

// ReadPid reads a pid file the harness wrote (Node.PidFile).
func ReadPid(file string) (int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid < 1 {
		return 0, fmt.Errorf("%s: %q is not a pid", file, strings.TrimSpace(string(data)))
	}
	return pid, nil
}

// alive tells whether process pid exists, as kill -0 does.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// runningPid is the pid in file when that process runs; 0 otherwise.
func runningPid(file string) int {
	if pid, err := ReadPid(file); err == nil && alive(pid) {
		return pid
	}
	return 0
}

// stopPid stops the process whose pid is in file, if it runs: SIGTERM,
// then SIGKILL after stopGrace; then removes file. It returns the pid
// (0: none ran) and whether SIGKILL was needed.
func stopPid(file string) (pid int, killed bool, err error) {
	pid, err = ReadPid(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if !alive(pid) {
		return 0, false, os.Remove(file)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	if !waitGone(pid, stopGrace) {
		syscall.Kill(pid, syscall.SIGKILL)
		killed = true
		waitGone(pid, 10*time.Second)
	}
	return pid, killed, os.Remove(file)
}

// waitGone waits up to d for process pid to exit.
func waitGone(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); alive(pid); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// tail is the last n lines of file, for an error.
func tail(file string, n int) string {
	data, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
