package multicall

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// childProcess runs the component as `<this binary> <name> args` in a
// child process, as the stock flavour does (flavor.ComponentsInOneProcess):
// unpatched components panic when a second one in the process sets up the
// signal context. The child gets SIGTERM when ctx ends or when this
// process dies, and inherits its output and network namespace.
func childProcess(ctx context.Context, name string, args []string, done chan error) <-chan error {
	self, err := os.Executable()
	if err != nil {
		done <- fmt.Errorf("%s: locating this binary: %w", name, err)
		return done
	}
	cmd := exec.CommandContext(ctx, self, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
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
