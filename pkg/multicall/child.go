package multicall

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// childStopDelay is how long a child has after SIGTERM before it is
// killed.
const childStopDelay = 30 * time.Second

// childProcess runs the component as `<this binary> <name> args` in a
// child process, as the stock flavour does (flavor.ComponentsInOneProcess):
// unpatched components panic when a second one in the process sets up the
// signal context. Its end is reported on done, as an in-process
// component's is.
func childProcess(ctx context.Context, name string, args []string, done chan error) <-chan error {
	cmd := childCommand(ctx, selfBinary(), name, args)
	if err := cmd.Start(); err != nil {
		done <- fmt.Errorf("%s: %w", name, err)
		return done
	}
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = fmt.Errorf("%s stopped", name)
		}
		done <- fmt.Errorf("%s: %w", name, err)
	}()
	return done
}

// childCommand is `binary name args`: the child gets SIGTERM when ctx
// ends or when the thread that started it dies (Pdeathsig; Supervise
// keeps that thread), SIGKILL childStopDelay after SIGTERM, and inherits
// this process's output and network namespace.
func childCommand(ctx context.Context, binary, name string, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = childStopDelay
	return cmd
}
